// Package admission is the decision every transport of hotlimit shares:
// httplimit's middleware and grpclimit's interceptor are thin adapters
// over its Pipeline, which puts nothing of HTTP or gRPC in the decision
// and uses the standard library only.
//
// A Pipeline decides a request in its group: it extracts the request's
// identity with a KeyFunc (httplimit's and grpclimit's key functions write
// the identities both transports share, so one client gets one key over
// both; httplimit.ContextKey and grpclimit.FuncKey write an
// application's own),
// builds one layer per limit the request is checked against (its group's,
// keyed rl:v1:<identity>:route:<group> in a shared store; a global one,
// rl:v1:<identity>; and one per IdentityLayer, keyed by an identity of
// its own: per IP, per token, per tenant), and asks a Backend to admit it on all of them, all
// or nothing (hotlimit.AllowLayers): a request one layer refuses consumes
// nothing in the others. The Result says what was decided and, for each
// layer, its own Remaining, the wait for its next unit and the policy it
// was decided under, all from the decision itself (hotlimit.LayerState),
// never from a second reading.
//
// The Backend is the in-process Local (hotlimit limiters, one per named
// limit) or a shared store such as redislimit's. A Local gets the same
// keys in a shorter layout of its own, without the version prefix and
// with the group named by a number, so that an IPv4 client's keys fit
// the 15 bytes a hotlimit slot holds inline (keys.go describes it;
// Pipeline.LayerKey gives a pipeline's keys); every other backend gets
// the layout above, byte for byte. An Observer sees every
// decision the backend makes, with how long it took, for metrics and
// traces.
package admission
