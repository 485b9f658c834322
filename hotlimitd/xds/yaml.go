package xds

import (
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"gopkg.in/yaml.v3"
)

// The YAML of a RateLimitConfig: envoyproxy/ratelimit's file, field for
// field, in the order a file has them.
type (
	yamlDomain struct {
		Domain      string           `yaml:"domain"`
		Descriptors []yamlDescriptor `yaml:"descriptors,omitempty"`
	}
	yamlDescriptor struct {
		Key            string           `yaml:"key"`
		Value          string           `yaml:"value,omitempty"`
		RateLimit      *yamlRateLimit   `yaml:"rate_limit,omitempty"`
		Descriptors    []yamlDescriptor `yaml:"descriptors,omitempty"`
		ShadowMode     bool             `yaml:"shadow_mode,omitempty"`
		DetailedMetric bool             `yaml:"detailed_metric,omitempty"`
	}
	yamlRateLimit struct {
		Unit            string        `yaml:"unit,omitempty"`
		RequestsPerUnit *uint32       `yaml:"requests_per_unit,omitempty"`
		Unlimited       bool          `yaml:"unlimited,omitempty"`
		Name            string        `yaml:"name,omitempty"`
		Replaces        []yamlReplace `yaml:"replaces,omitempty"`
	}
	yamlReplace struct {
		Name string `yaml:"name"`
	}
)

// ToYAML returns the configuration file that says what rc says, for
// config.Parse: an empty value is a rule of its key alone (proto3 cannot
// tell it from no value), a unit of UNKNOWN (0: not set) is no unit, and
// an unlimited rate_limit has no requests_per_unit, so that the parser
// refuses what a file could not say either.
func ToYAML(rc *rlsconfv3.RateLimitConfig) ([]byte, error) {
	return yaml.Marshal(yamlDomain{Domain: rc.GetDomain(), Descriptors: descriptors(rc.GetDescriptors())})
}

func descriptors(ds []*rlsconfv3.RateLimitDescriptor) []yamlDescriptor {
	var out []yamlDescriptor
	for _, d := range ds {
		out = append(out, yamlDescriptor{
			Key: d.GetKey(), Value: d.GetValue(), RateLimit: rateLimit(d.GetRateLimit()),
			Descriptors: descriptors(d.GetDescriptors()), ShadowMode: d.GetShadowMode(), DetailedMetric: d.GetDetailedMetric(),
		})
	}
	return out
}

func rateLimit(p *rlsconfv3.RateLimitPolicy) *yamlRateLimit {
	if p == nil {
		return nil
	}
	r := &yamlRateLimit{Unlimited: p.GetUnlimited(), Name: p.GetName()}
	if p.GetUnit() != rlsconfv3.RateLimitUnit_UNKNOWN {
		r.Unit = p.GetUnit().String()
	}
	if !r.Unlimited || p.GetRequestsPerUnit() != 0 {
		n := p.GetRequestsPerUnit()
		r.RequestsPerUnit = &n
	}
	for _, rep := range p.GetReplaces() {
		r.Replaces = append(r.Replaces, yamlReplace{Name: rep.GetName()})
	}
	return r
}
