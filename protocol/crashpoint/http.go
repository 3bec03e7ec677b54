package crashpoint

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
)

// Handler serves the points at /crashpoints:
//
//	GET    /crashpoints          every point of this process with its state
//	PUT    /crashpoints/{name}   body: an arming such as "kill@3" or "delay:200ms@*"
//	                             (501 for kill or pause outside Linux)
//	DELETE /crashpoints/{name}   disarm, and let a hold waiting at the point go on
func (s *Set) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /crashpoints", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.Statuses())
	})
	mux.HandleFunc("PUT /crashpoints/{name}", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1024))
		if err != nil {
			http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
			return
		}
		a, err := ParseArming(string(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := s.Arm(r.PathValue("name"), a); err != nil {
			code := http.StatusNotFound
			if errors.Is(err, errors.ErrUnsupported) {
				code = http.StatusNotImplemented // kill or pause outside Linux
			}
			http.Error(w, err.Error(), code)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("DELETE /crashpoints/{name}", func(w http.ResponseWriter, r *http.Request) {
		if err := s.Disarm(r.PathValue("name")); err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}
