// Command render renders deploy/helm/pebsprof the way `helm template` does, for CI without
// helm (not packaged in Debian 12): the subset of helm the chart uses, on Go's text/template
// with Debian's sprig. .Values (values.yaml, then -f files, then --set), .Release, .Chart,
// .Template; include, tpl, required, toYaml, fromYaml, toJson, lookup, sprig minus env and
// expandenv, as helm itself. Templates named _* define partials; NOTES.txt is not output.
//
//	render --chart DIR [--release-name NAME] [--namespace NS] [-f values.yaml]... [--set k.p=v]...
//
// Build offline (GOPATH mode, Debian's packaged sources):
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o render main.go
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig"
	"sigs.k8s.io/yaml"
)

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func die(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "render: "+format+"\n", args...)
	os.Exit(1)
}

func readYAMLMap(file string) map[string]interface{} {
	b, err := os.ReadFile(file)
	if err != nil {
		die("%v", err)
	}
	m := map[string]interface{}{}
	if err := yaml.Unmarshal(b, &m); err != nil {
		die("%s: %v", file, err)
	}
	if m == nil {
		m = map[string]interface{}{}
	}
	return m
}

// mergeInto copies src over dst: maps merge key by key, anything else replaces; a null in
// src deletes the key (helm's coalescing of user values with the chart's).
func mergeInto(dst, src map[string]interface{}) {
	for k, v := range src {
		if v == nil {
			delete(dst, k)
			continue
		}
		sm, sok := v.(map[string]interface{})
		dm, dok := dst[k].(map[string]interface{})
		if sok && dok {
			mergeInto(dm, sm)
		} else {
			dst[k] = v
		}
	}
}

// setValue applies one --set a.b.c=v; v typed as helm's strvals does (int64, bool, null,
// else string); lists as {a,b}.
func setValue(vals map[string]interface{}, expr string) {
	eq := strings.IndexByte(expr, '=')
	if eq <= 0 {
		die("--set %q: want key=value", expr)
	}
	keys := strings.Split(expr[:eq], ".")
	raw := expr[eq+1:]
	var v interface{}
	if strings.HasPrefix(raw, "{") && strings.HasSuffix(raw, "}") {
		var list []interface{}
		if inner := raw[1 : len(raw)-1]; inner != "" {
			for _, s := range strings.Split(inner, ",") {
				list = append(list, typed(s))
			}
		}
		v = list
	} else {
		v = typed(raw)
	}
	m := vals
	for _, k := range keys[:len(keys)-1] {
		next, ok := m[k].(map[string]interface{})
		if !ok {
			next = map[string]interface{}{}
			m[k] = next
		}
		m = next
	}
	m[keys[len(keys)-1]] = v
}

func typed(s string) interface{} {
	switch s {
	case "true":
		return true
	case "false":
		return false
	case "null":
		return nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && (s == "0" || s[0] != '0') {
		return n
	}
	return s
}

func toYAML(v interface{}) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(b), "\n")
}

func fromYAML(s string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

func toJSON(v interface{}) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// chartMeta exposes Chart.yaml with helm's field names (.Chart.Name, .Chart.AppVersion).
func chartMeta(file string) map[string]interface{} {
	raw := readYAMLMap(file)
	names := map[string]string{"apiVersion": "APIVersion", "appVersion": "AppVersion",
		"kubeVersion": "KubeVersion"}
	out := map[string]interface{}{}
	for k, v := range raw {
		if n, ok := names[k]; ok {
			out[n] = v
		} else {
			out[strings.ToUpper(k[:1])+k[1:]] = v
		}
	}
	if out["Name"] == nil {
		die("%s: no name", file)
	}
	return out
}

func main() {
	var chartDir, release, namespace string
	var valueFiles, sets multiFlag
	flag.StringVar(&chartDir, "chart", "", "chart directory")
	flag.StringVar(&release, "release-name", "pebsprof", "release name")
	flag.StringVar(&namespace, "namespace", "default", "release namespace")
	flag.Var(&valueFiles, "f", "values file (repeatable)")
	flag.Var(&sets, "set", "key.path=value (repeatable)")
	flag.Parse()
	if chartDir == "" || flag.NArg() != 0 {
		die("usage: render --chart DIR [--release-name N] [--namespace NS] [-f FILE]... [--set k=v]...")
	}

	chart := chartMeta(filepath.Join(chartDir, "Chart.yaml"))
	chartName := chart["Name"].(string)
	values := readYAMLMap(filepath.Join(chartDir, "values.yaml"))
	for _, f := range valueFiles {
		mergeInto(values, readYAMLMap(f))
	}
	for _, s := range sets {
		setValue(values, s)
	}

	var files []string
	tdir := filepath.Join(chartDir, "templates")
	err := filepath.Walk(tdir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		die("%v", err)
	}
	sort.Strings(files)

	root := template.New("root")
	funcs := sprig.TxtFuncMap()
	delete(funcs, "env")
	delete(funcs, "expandenv")
	funcs["toYaml"] = toYAML
	funcs["fromYaml"] = fromYAML
	funcs["toJson"] = toJSON
	funcs["lookup"] = func(string, string, string, string) (map[string]interface{}, error) {
		return map[string]interface{}{}, nil
	}
	funcs["required"] = func(msg string, v interface{}) (interface{}, error) {
		if v == nil {
			return nil, errors.New(msg)
		}
		if s, ok := v.(string); ok && s == "" {
			return nil, errors.New(msg)
		}
		return v, nil
	}
	funcs["include"] = func(name string, data interface{}) (string, error) {
		var buf bytes.Buffer
		err := root.ExecuteTemplate(&buf, name, data)
		return buf.String(), err
	}
	funcs["tpl"] = func(text string, data interface{}) (string, error) {
		t, err := root.Clone()
		if err != nil {
			return "", err
		}
		t, err = t.New("tpl").Parse(text)
		if err != nil {
			return "", err
		}
		var buf bytes.Buffer
		err = t.Execute(&buf, data)
		return strings.ReplaceAll(buf.String(), "<no value>", ""), err
	}
	root.Funcs(funcs).Option("missingkey=zero")

	names := make([]string, len(files))
	for i, f := range files {
		rel, _ := filepath.Rel(chartDir, f)
		names[i] = path.Join(chartName, filepath.ToSlash(rel))
		b, err := os.ReadFile(f)
		if err != nil {
			die("%v", err)
		}
		if _, err := root.New(names[i]).Parse(string(b)); err != nil {
			die("%v", err)
		}
	}

	releaseObj := map[string]interface{}{"Name": release, "Namespace": namespace,
		"Service": "Helm", "IsInstall": true, "IsUpgrade": false, "Revision": 1}
	var out bytes.Buffer
	for _, name := range names {
		base := path.Base(name)
		if strings.HasPrefix(base, "_") || base == "NOTES.txt" {
			continue
		}
		data := map[string]interface{}{"Values": values, "Release": releaseObj, "Chart": chart,
			"Template": map[string]interface{}{"Name": name,
				"BasePath": path.Join(chartName, "templates")}}
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, name, data); err != nil {
			die("%v", err)
		}
		text := strings.ReplaceAll(buf.String(), "<no value>", "")
		for _, doc := range strings.Split(text, "\n---") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", name,
				strings.Trim(strings.TrimPrefix(doc, "---"), "\n"))
		}
	}
	os.Stdout.Write(out.Bytes())
}
