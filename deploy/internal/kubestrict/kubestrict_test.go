package kubestrict

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestSplitDocuments(t *testing.T) {
	in := "# header only\n---\na: 1\n--- # comment\n# just a comment\n\n---\nb: 2\n---\n"
	got := SplitDocuments([]byte(in))
	if len(got) != 2 || !strings.Contains(string(got[0]), "a: 1") || !strings.Contains(string(got[1]), "b: 2") {
		t.Fatalf("got %q, want the documents a and b", got)
	}
}

// TestDecodeStrict: what the API server would refuse or drop is an error.
func TestDecodeStrict(t *testing.T) {
	cases := map[string]string{
		"":                            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {k: v}\n",
		`unknown field "datta"`:       "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndatta: {k: v}\n",
		`unknown field "Data"`:        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\nData: {k: v}\n",
		`key "data" already set`:      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {k: v}\ndata: {k: w}\n",
		"cannot unmarshal":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: [1]\n",
		`"a" sets metadata.namespace`: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: x}\n",
		"metadata.name is empty":      "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n",
	}
	for want, doc := range cases {
		err := DecodeInto([]byte(doc), map[string]*corev1.ConfigMap{})
		switch {
		case want == "" && err != nil:
			t.Errorf("valid document refused: %v", err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%q: error %v, want one containing %q", doc, err, want)
		}
	}
}
