// Package lab is ratelab's engine: traffic shapes (shapes.go) and CSV
// traces (trace.go), a runner that sends them through hotlimit's real
// limiters on a manual clock (run.go), the statistics of each outcome
// (metrics.go), each algorithm's own bound and what it fits (algos.go,
// guide.go), the per-algorithm cost measurements (cost.go), and the
// terminal table (table.go) and the PNG charts that show them: a model
// of each figure that tests can read (chartmodel.go), drawn with
// gonum/plot (chart.go). Durations that can grow large go through the
// overflow-checked helpers of durations.go.
//
// Everything but cost.go is deterministic: the same shapes, policy and
// seed give the same results, byte for byte.
package lab
