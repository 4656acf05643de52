package proxy

import (
	"net/http"
	"net/http/httputil"
	"net/url"
)

// httputilProxy is the bare reverse proxy toolgate is measured against.
type httputilProxy struct{ target *url.URL }

func (p *httputilProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(p.target) }}
	rp.ServeHTTP(w, r)
}
