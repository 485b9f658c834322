// Package config reads hotlimitd's rate limit configuration: the
// descriptor YAML of envoyproxy/ratelimit, extended with hotlimit's
// algorithms and costs, validated with errors that name the file, the
// line and the field, and hot-reloaded by a Watcher.
//
// # The file
//
// A file holds a domain and a tree of descriptor rules (several domains
// may share a file, each in its own YAML document):
//
//	domain: messaging
//	descriptors:
//	  # (message_type, marketing), (to_number, N): 5 a day for each N.
//	  - key: message_type
//	    value: marketing
//	    descriptors:
//	      - key: to_number
//	        rate_limit:
//	          unit: day
//	          requests_per_unit: 5
//	  # (to_number, N): 100 a day for each N, as a token bucket that
//	  # refills 100 a day and holds at most 20.
//	  - key: to_number
//	    rate_limit:
//	      unit: day
//	      requests_per_unit: 100
//	      algorithm: token_bucket
//	      burst: 20
//	  # (api_key, K): each K gets 1000 units a minute; every hit costs 10.
//	  - key: api_key
//	    rate_limit:
//	      unit: minute
//	      requests_per_unit: 1000
//	      algorithm: sliding_window
//	      cost: 10
//	    shadow_mode: true
//
// A domain has:
//   - domain: its name, unique among the files loaded together
//     (required), unless they are loaded with MergeDomains: the
//     domain's rules are then those of every file that has it;
//   - descriptors: its rules.
//
// A rule (descriptor) has:
//   - key: the entry key it matches (required);
//   - value: the entry value it matches; without it, the rule matches
//     every value of its key and counts each value apart. A value ending
//     in * is a wildcard: it matches every value starting with what
//     precedes the * (each value counted apart);
//   - rate_limit: the limit of a descriptor that ends at this rule;
//   - descriptors: the rules for the descriptor's next entry;
//   - shadow_mode: true: the limit counts and reports as usual, but never
//     refuses (a server answers OK);
//   - detailed_metric: true: read for envoyproxy/ratelimit's files, where it
//     names a limit's metrics after the value a key-only rule matched. It
//     changes no decision; Limit.DetailedMetric carries it to a server
//     that names metrics after descriptors (hotlimitd's name them after
//     limits only, never after values);
//   - value_to_metric: true or false, at any level: read for
//     envoyproxy/ratelimit's files, where it names a limit's metrics
//     after the request's value at this level; it changes nothing here;
//   - share_threshold: true, on a wildcard rule only: every value the
//     wildcard matches counts in one counter.
//
// A rate_limit has:
//   - unit: second, minute, hour, day, week, month (30 days) or year (365
//     days), in any case;
//   - requests_per_unit: from 0 to 4294967295; 0 refuses every hit;
//   - unlimited: true: the rule matches and never refuses; a rate_limit
//     that has it has no other field but name and replaces;
//   - name, replaces: a list of {name: N}: when one request has
//     descriptors that match both a limit that replaces N and the limit
//     named N, the limit named N is not decided (DropReplaced), unless
//     it is unlimited; every name replaced must be the name of a
//     rate_limit of the domain;
//   - algorithm (hotlimit's): fixed_window (the default, envoyproxy/ratelimit's
//     own: requests_per_unit per window of one unit), sliding_window,
//     sliding_log (at most 1024 per unit), token_bucket or leaky_bucket
//     (requests_per_unit per unit, burst at once), each as the hotlimit
//     policy of that name. Concurrency limits are refused: the rate limit
//     service protocol has no call that ends a request;
//   - burst (hotlimit's): the capacity of a token_bucket or leaky_bucket,
//     at least 1; requests_per_unit by default;
//   - cost (hotlimit's): what one hit costs, from 1 to the limit's
//     capacity; 1 by default. A request's hits_addend multiplies it.
//
// # Matching
//
// Config.Match finds the limit of a descriptor as envoyproxy/ratelimit
// does: at each level the rule with the entry's key and value comes
// first, then the first wildcard rule that matches it, then the rule
// with its key alone; a descriptor matches only a rule as deep as it has
// entries. See Match. One difference is kept on purpose: a wildcard rule
// matches only an entry of its own key. envoyproxy/ratelimit tests a
// wildcard as a prefix of key + "_" + value, so that its rule of key
// "remote" and value "*" also matches an entry of key "remote_address";
// hotlimitd does not follow it across keys.
//
// # Errors
//
// Parse and Load refuse a file with every one of its errors, each an
// *ErrConfig written "file:line: field: message": YAML that does not
// parse, fields that are unknown, missing, given twice or of the wrong
// type, values out of range, rules given twice at one level, policies
// that hotlimit refuses (hotlimit.Describe's error), and
// the envoyproxy/ratelimit field that hotlimitd does not support
// (quota_mode: there, an over-limit status is answered OK and reported
// in the response's dynamic metadata, which hotlimitd does not write;
// shadow_mode counts without refusing).
// Nothing in a file is ignored; a YAML
// document with nothing in it (a file that ends in "---") is skipped.
//
// Some files that envoyproxy/ratelimit loads are refused here, on
// purpose, because it reads them as something their author is unlikely
// to have meant, and a rate limit that means something else fails
// silently in production: a rate_limit without requests_per_unit (it
// reads 0, which refuses every request: write 0 to mean that); a replaces
// that names no rate_limit of the domain (a typo there leaves both limits
// decided); requests_per_unit beside unlimited: true; shadow_mode or
// detailed_metric on a rule without a rate_limit; value: "" or value: ~
// (it reads them as no value, a rule for every value of the key: leave
// value out); booleans written yes, no, on or off (YAML 1.1's, which
// envoyproxy/ratelimit's parser still reads); and YAML merge keys (<<).
// Each is refused at its line with the reason, and a reload that meets
// one keeps the running configuration.
//
// One file that both load is read differently, and hotlimitd's reading
// is the one its author wrote: a file of several YAML documents.
// envoyproxy/ratelimit reads the first and ignores the others without a
// word (the harness's TestDocumentsAfterTheFirst checks it on the version
// it pins); hotlimitd loads every one. A file moved from
// envoyproxy/ratelimit that has documents after its first thus has
// limits here that it never had there.
//
// # Reloading
//
// A Watcher reloads the configuration when its content changes, or on
// Reload; a configuration that fails keeps the running one. A limit's
// Name stays the same across reloads while the rule's place in the tree
// and its policy do, so that a backend keeps its state.
package config
