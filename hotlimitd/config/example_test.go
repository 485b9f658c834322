package config_test

import (
	"fmt"

	"github.com/hotlimit/hotlimit/hotlimitd/config"
)

func ExampleConfig_Match() {
	c, err := config.Parse("limits.yaml", []byte(`
domain: messaging
descriptors:
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit: {unit: day, requests_per_unit: 5}
  - key: to_number
    rate_limit: {unit: day, requests_per_unit: 100, algorithm: sliding_window}
`))
	if err != nil {
		panic(err)
	}
	buf := make([]byte, 0, 64)
	for _, d := range [][]config.Entry{
		{{Key: "message_type", Value: "marketing"}, {Key: "to_number", Value: "2061111111"}},
		{{Key: "to_number", Value: "2061111111"}},
		{{Key: "message_type", Value: "marketing"}},
	} {
		l, key, ok := c.Match(buf[:0], "messaging", d)
		if !ok {
			fmt.Printf("%v: not limited\n", d)
			continue
		}
		fmt.Printf("%v: %d per %v (%v), limit %s, key %q\n", d, l.RequestsPerUnit, l.Unit, l.Algorithm, l.Name, key)
	}
	// Output:
	// [{message_type marketing} {to_number 2061111111}]: 5 per day (fixed_window), limit messaging/message_type=marketing/to_number#fixed_window:5/day, key "\tmarketing\n2061111111"
	// [{to_number 2061111111}]: 100 per day (sliding_window), limit messaging/to_number#sliding_window:100/day, key "\n2061111111"
	// [{message_type marketing}]: not limited
}

func ExampleParse_errors() {
	_, err := config.Parse("limits.yaml", []byte(`domain: messaging
descriptors:
  - key: to_number
    rate_limit:
      unit: fortnight
      requests_per_unit: 100
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 5
      algorithm: concurrency
  - key: user
    rate_limit: {unit: second, requests_per_unit: 10, cost: 20}
    shadow: true
`))
	fmt.Println(err)
	// Output:
	// limits.yaml:5: descriptors[0].rate_limit.unit: unknown unit "fortnight" (want second, minute, hour, day, week, month or year)
	// limits.yaml:7: descriptors[1].key: a rule with key "to_number" and no value is also at line 3
	// limits.yaml:11: descriptors[1].rate_limit.algorithm: concurrency limits are not supported: the rate limit service protocol has no call to release a request when it ends
	// limits.yaml:13: descriptors[2].rate_limit.cost: 20 exceeds the limit's capacity 10: every hit would be refused
	// limits.yaml:14: descriptors[2].shadow: unknown field (a descriptor has key, value, rate_limit, descriptors, shadow_mode, detailed_metric, value_to_metric and share_threshold)
}
