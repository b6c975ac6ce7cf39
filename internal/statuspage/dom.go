package statuspage

import (
	"regexp"
	"strconv"
)

// The page reports what it drew in its DOM, so a headless browser can
// check it: each chart's <canvas> carries data-points (samples drawn) and
// data-max (the largest value), and <body> carries data-state and
// data-published.

// Chart ids on the page.
const (
	RateChart = "rate-chart"
	LagChart  = "lag-chart"
)

var chartAttrs = regexp.MustCompile(`<canvas id="([a-z-]+)" data-points="(\d+)" data-max="([0-9.e+-]+)"`)

// ReadChart finds chart id in a DOM dump and returns how many points it
// drew and their maximum; ok is false when the chart is not there.
func ReadChart(dom, id string) (points int, maxValue float64, ok bool) {
	for _, m := range chartAttrs.FindAllStringSubmatch(dom, -1) {
		if m[1] != id {
			continue
		}
		points, err1 := strconv.Atoi(m[2])
		maxValue, err2 := strconv.ParseFloat(m[3], 64)
		return points, maxValue, err1 == nil && err2 == nil
	}
	return 0, 0, false
}

// ReadBody returns the value of <body>'s data-name attribute in a DOM dump.
func ReadBody(dom, name string) (string, bool) {
	m := regexp.MustCompile(`<body[^>]*\sdata-` + regexp.QuoteMeta(name) + `="([^"]*)"`).FindStringSubmatch(dom)
	if m == nil {
		return "", false
	}
	return m[1], true
}
