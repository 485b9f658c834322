package main

import (
	"time"

	"github.com/hotlimit/hotlimit/hotlimitd"
	"github.com/prometheus/client_golang/prometheus"
)

// reloadMetrics count configuration loads.
type reloadMetrics struct {
	reloads     *prometheus.CounterVec
	lastSuccess prometheus.Gauge
	lastOK      prometheus.Gauge
	started     bool // the first configuration was applied
}

func newReloadMetrics(reg prometheus.Registerer) *reloadMetrics {
	m := &reloadMetrics{
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hotlimitd_config_reloads_total",
			Help: "Configuration loads after the first, by result: success (applied) or failure (refused; the running configuration kept).",
		}, []string{"result"}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hotlimitd_config_last_reload_success_timestamp_seconds",
			Help: "Unix time at which the running configuration was applied.",
		}),
		lastOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hotlimitd_config_last_reload_successful",
			Help: "1 if the last configuration load was applied, 0 if it was refused.",
		}),
	}
	m.reloads.WithLabelValues("success")
	m.reloads.WithLabelValues("failure")
	reg.MustRegister(m.reloads, m.lastSuccess, m.lastOK)
	return m
}

// success records a configuration applied at t; the first one (at
// start) is not a reload.
func (m *reloadMetrics) success(t time.Time) {
	if m.started {
		m.reloads.WithLabelValues("success").Inc()
	}
	m.started = true
	m.lastSuccess.Set(float64(t.UnixNano()) / 1e9)
	m.lastOK.Set(1)
}

func (m *reloadMetrics) failure() {
	m.reloads.WithLabelValues("failure").Inc()
	m.lastOK.Set(0)
}

// serverCollector exports a Server's Stats, read at each scrape.
type serverCollector struct {
	srv *hotlimitd.Server
}

var (
	requestsDesc = prometheus.NewDesc("hotlimitd_requests_total",
		"ShouldRateLimit requests, by answer: ok, over_limit, failed_closed (gRPC Unavailable: the backend could not decide), failed_open (answered OK for that reason), invalid (gRPC InvalidArgument).",
		[]string{"code"}, nil)
	shadowOverDesc = prometheus.NewDesc("hotlimitd_shadow_over_limit_total",
		"Shadow-mode descriptors that would have been over their limit (answered OK).", nil, nil)
	shadowErrDesc = prometheus.NewDesc("hotlimitd_shadow_errors_total",
		"Shadow-mode descriptors the backend could not decide (answered OK without a limit).", nil, nil)
)

func (c *serverCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- requestsDesc
	ch <- shadowOverDesc
	ch <- shadowErrDesc
}

func (c *serverCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.srv.Stats()
	for _, v := range []struct {
		code string
		n    uint64
	}{{"ok", st.OK}, {"over_limit", st.OverLimit}, {"failed_closed", st.FailedClosed}, {"failed_open", st.FailedOpen}, {"invalid", st.Invalid}} {
		ch <- prometheus.MustNewConstMetric(requestsDesc, prometheus.CounterValue, float64(v.n), v.code)
	}
	ch <- prometheus.MustNewConstMetric(shadowOverDesc, prometheus.CounterValue, float64(st.ShadowOverLimit))
	ch <- prometheus.MustNewConstMetric(shadowErrDesc, prometheus.CounterValue, float64(st.ShadowErrors))
}
