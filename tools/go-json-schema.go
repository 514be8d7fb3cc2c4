//go:build ignore

// Writes go_json_schema.txt: the JSON shape of every struct type reachable from
// v1.PodTemplateSpec, as encoding/json sees it. Run from a Kubernetes source tree with vendor/
// (placing this file at cmd/zzschema/main.go, e.g. with `go run -overlay`):
//
//	GOFLAGS=-mod=vendor go run ./cmd/zzschema > go_json_schema.txt.body
//
// and prepend the header comment of go_json_schema.txt.
package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var (
	timeT  = reflect.TypeOf(metav1.Time{})
	mtimeT = reflect.TypeOf(metav1.MicroTime{})
	qtyT   = reflect.TypeOf(resource.Quantity{})
	iosT   = reflect.TypeOf(intstr.IntOrString{})
	done   = map[reflect.Type]bool{}
	queue  []reflect.Type
	lines  []string
)

func shape(t reflect.Type) string {
	switch t {
	case timeT, mtimeT:
		return "t"
	case qtyT:
		return "q"
	case iosT:
		return "i"
	case reflect.TypeOf(metav1.FieldsV1{}):
		return "r"
	}
	switch t.Kind() {
	case reflect.Ptr:
		return "*" + shape(t.Elem())
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "y"
		}
		return "[]" + shape(t.Elem())
	case reflect.Map:
		return "{}" + shape(t.Elem())
	case reflect.String:
		return "s"
	case reflect.Bool:
		return "b"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return "n"
	case reflect.Struct:
		if _, ok := reflect.New(t).Interface().(json.Marshaler); ok {
			panic("unexpected marshaler " + t.String())
		}
		if !done[t] {
			done[t] = true
			queue = append(queue, t)
		}
		return "@" + t.Name()
	case reflect.Interface:
		return "x"
	}
	panic("unexpected kind " + t.String())
}

func fields(owner string, t reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || f.PkgPath != "" {
			continue
		}
		parts := strings.Split(tag, ",")
		name := parts[0]
		omit := false
		inline := false
		for _, p := range parts[1:] {
			omit = omit || p == "omitempty"
			inline = inline || p == "inline"
		}
		if inline || (f.Anonymous && name == "") {
			fields(owner, f.Type)
			continue
		}
		if name == "" {
			name = f.Name
		}
		o := "-"
		if omit {
			o = "o"
		}
		lines = append(lines, fmt.Sprintf("%s %s %s %s", owner, name, o, shape(f.Type)))
	}
}

func main() {
	shape(reflect.TypeOf(v1.PodTemplateSpec{}))
	names := map[string]string{}
	for len(queue) > 0 {
		t := queue[0]
		queue = queue[1:]
		if prev, ok := names[t.Name()]; ok && prev != t.PkgPath() {
			panic("name clash " + t.Name())
		}
		names[t.Name()] = t.PkgPath()
		fields(t.Name(), t)
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
}
