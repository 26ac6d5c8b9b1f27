package capture

import (
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// uaCases are real User-Agent strings with the values posthog-js would
// report for them (user-agent-utils.ts), except where ParseUserAgent's doc
// comment says it departs.
var uaCases = []struct {
	name, ua                string
	browser, os, deviceType string
}{
	{"chrome windows", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36", "Chrome", "Windows", "Desktop"},
	{"chrome mac", "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36", "Chrome", "Mac OS X", "Desktop"},
	{"safari mac", "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.6 Safari/605.1.15", "Safari", "Mac OS X", "Desktop"},
	{"safari iphone", "Mozilla/5.0 (iPhone; CPU iPhone OS 17_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.6 Mobile/15E148 Safari/604.1", "Mobile Safari", "iOS", "Mobile"},
	{"safari ipad", "Mozilla/5.0 (iPad; CPU OS 17_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.6 Mobile/15E148 Safari/604.1", "Mobile Safari", "iOS", "Tablet"},
	{"chrome ios", "Mozilla/5.0 (iPhone; CPU iPhone OS 17_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/131.0.6778.73 Mobile/15E148 Safari/604.1", "Chrome iOS", "iOS", "Mobile"},
	{"firefox ios", "Mozilla/5.0 (iPhone; CPU iPhone OS 17_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) FxiOS/133.0 Mobile/15E148 Safari/605.1.15", "Firefox iOS", "iOS", "Mobile"},
	{"facebook ios", "Mozilla/5.0 (iPhone; CPU iPhone OS 17_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 [FBAN/FBIOS;FBAV/450.0.0.38.108]", "Facebook Mobile", "iOS", "Mobile"},
	{"chrome android phone", "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.6778.104 Mobile Safari/537.36", "Chrome", "Android", "Mobile"},
	{"chrome android reduced", "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36", "Chrome", "Android", "Mobile"},
	{"chrome android tablet", "Mozilla/5.0 (Linux; Android 13; SM-X706B) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.6778.104 Safari/537.36", "Chrome", "Android", "Tablet"},
	{"samsung internet", "Mozilla/5.0 (Linux; Android 14; SAMSUNG SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/26.0 Chrome/122.0.0.0 Mobile Safari/537.36", "Samsung Internet", "Android", "Mobile"},
	{"firefox android", "Mozilla/5.0 (Android 14; Mobile; rv:133.0) Gecko/133.0 Firefox/133.0", "Firefox", "Android", "Mobile"},
	{"android browser", "Mozilla/5.0 (Linux; U; Android 4.0.3; ko-kr; LG-L160L Build/IML74K) AppleWebkit/534.30 (KHTML, like Gecko) Version/4.0 Mobile Safari/534.30", "Android Mobile", "Android", "Mobile"},
	{"firefox linux", "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0", "Firefox", "Linux", "Desktop"},
	{"firefox ubuntu", "Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0", "Firefox", "Linux", "Desktop"},
	{"firefox windows", "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0", "Firefox", "Windows", "Desktop"},
	{"edge windows", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.2903.86", "Microsoft Edge", "Windows", "Desktop"},
	{"opera windows", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 OPR/115.0.0.0", "Opera", "Windows", "Desktop"},
	{"internet explorer 11", "Mozilla/5.0 (Windows NT 6.1; WOW64; Trident/7.0; rv:11.0) like Gecko", "Internet Explorer", "Windows", "Desktop"},
	{"chrome os", "Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36", "Chrome", "Chrome OS", "Desktop"},
	{"vivaldi", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Vivaldi/7.0.3495.18", "Chrome", "Windows", "Desktop"},
	{"googlebot", "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "", "", ""},
	{"bingbot", "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)", "", "", ""},
	{"python-requests", "python-requests/2.32.3", "", "", ""},
	{"curl", "curl/8.5.0", "", "", ""},
	{"posthog-python", "posthog-python/7.91.1", "", "", ""},
	{"empty", "", "", "", ""},
	{"garbage", "\xff\xfe\x00(;;/)", "", "", ""},
}

func TestParseUserAgent(t *testing.T) {
	for _, c := range uaCases {
		t.Run(c.name, func(t *testing.T) {
			b, o, d := ParseUserAgent(c.ua)
			if b != c.browser || o != c.os || d != c.deviceType {
				t.Errorf("ParseUserAgent(%q) = (%q, %q, %q), want (%q, %q, %q)", c.ua, b, o, d, c.browser, c.os, c.deviceType)
			}
		})
	}
}

// TestParseUserAgentNoAllocs pins the "cheap" half of the contract: enrichment
// runs per event on the capture paths.
func TestParseUserAgentNoAllocs(t *testing.T) {
	ParseUserAgent(uaCases[0].ua) // build the trie outside the measurement
	for _, c := range uaCases {
		if n := testing.AllocsPerRun(20, func() { ParseUserAgent(c.ua) }); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", c.name, n)
		}
	}
}

// knownValues are every value ParseUserAgent may return, by position.
var knownValues = [3]map[string]bool{
	{"": true, "Chrome": true, "Chrome iOS": true, "Firefox": true, "Firefox iOS": true, "Safari": true, "Mobile Safari": true,
		"Microsoft Edge": true, "Opera": true, "Opera Mini": true, "Samsung Internet": true, "Internet Explorer": true,
		"Android Mobile": true, "Facebook Mobile": true, "Vivaldi": true, "Amazon Silk": true, "Falkon": true,
		"Nintendo Browser": true, "Yandex Browser": true, "Huawei Browser": true},
	{"": true, "Windows": true, "Mac OS X": true, "iOS": true, "Android": true, "Linux": true, "Chrome OS": true, "FreeBSD": true, "OpenBSD": true},
	{"": true, "Desktop": true, "Mobile": true, "Tablet": true, "TV": true},
}

func FuzzParseUserAgent(f *testing.F) {
	for _, c := range uaCases {
		f.Add(c.ua)
	}
	f.Add(strings.Repeat("Mozilla/5.0 (", 1000))
	f.Add("Chrome/" + strings.Repeat("9", 100) + ".1.2.3.4.5.6.7.8.9")
	f.Fuzz(func(t *testing.T, ua string) {
		got := [3]string{}
		got[0], got[1], got[2] = ParseUserAgent(ua)
		for i, v := range got {
			if !knownValues[i][v] || !utf8.ValidString(v) {
				t.Fatalf("ParseUserAgent(%q) value %d = %q, not a known value", ua, i, v)
			}
		}
	})
}

func BenchmarkParseUserAgent(b *testing.B) {
	uas := make([]string, len(uaCases))
	for i, c := range uaCases {
		uas[i] = c.ua
	}
	ParseUserAgent(uas[0])
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		ParseUserAgent(uas[i%len(uas)])
	}
}

// TestParseUserAgentConcurrent: the shared parser is read-only after it is
// built (run with -race); the first calls race to build it once.
func TestParseUserAgentConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, c := range uaCases {
				if b, o, d := ParseUserAgent(c.ua); b != c.browser || o != c.os || d != c.deviceType {
					t.Errorf("%s: (%q, %q, %q)", c.name, b, o, d)
				}
			}
		}()
	}
	wg.Wait()
}
