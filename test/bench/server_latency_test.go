package bench

import (
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestProxyDurations reads the view requests' series of apiserver_request_duration_seconds, and
// only those, and counts the requests between two scrapes.
func TestProxyDurations(t *testing.T) {
	scrape := func(proxyFast, proxyAll, other uint64) requestDurations {
		text := strings.NewReplacer("FAST", strconv.FormatUint(proxyFast, 10), "ALL", strconv.FormatUint(proxyAll, 10), "OTHER", strconv.FormatUint(other, 10)).Replace(`# HELP apiserver_request_duration_seconds x
# TYPE apiserver_request_duration_seconds histogram
apiserver_request_duration_seconds_bucket{resource="locations",subresource="proxy",verb="CONNECT",le="0.005"} FAST
apiserver_request_duration_seconds_bucket{resource="locations",subresource="proxy",verb="CONNECT",le="0.01"} ALL
apiserver_request_duration_seconds_bucket{resource="locations",subresource="proxy",verb="CONNECT",le="+Inf"} ALL
apiserver_request_duration_seconds_sum{resource="locations",subresource="proxy",verb="CONNECT"} 1
apiserver_request_duration_seconds_count{resource="locations",subresource="proxy",verb="CONNECT"} ALL
apiserver_request_duration_seconds_bucket{resource="locations",subresource="",verb="LIST",le="0.005"} 0
apiserver_request_duration_seconds_bucket{resource="locations",subresource="",verb="LIST",le="0.01"} OTHER
apiserver_request_duration_seconds_bucket{resource="locations",subresource="",verb="LIST",le="+Inf"} OTHER
apiserver_request_duration_seconds_sum{resource="locations",subresource="",verb="LIST"} 1
apiserver_request_duration_seconds_count{resource="locations",subresource="",verb="LIST"} OTHER
`)
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		return proxyDurations(fams["apiserver_request_duration_seconds"])
	}
	before, after := scrape(10, 12, 5), scrape(205, 212, 50)
	n, within, ok := after.since(before, 0.005)
	if !ok || n != 200 || within != 195 {
		t.Errorf("since(before, 5ms) = %d requests, %d within, %v; want 200, 195, true", n, within, ok)
	}
	if _, _, ok := after.since(before, 0.004); ok {
		t.Errorf("since with a bound that is no bucket's answered ok")
	}
}
