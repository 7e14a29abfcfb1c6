// Command manifestcheck is the chart's and the compose file's strict validator, run by the tests.
//
//	manifestcheck k8s [FILE|-]   every object of a multi-document YAML stream (helm template's
//	                             output) decoded strictly into its Kubernetes API type: an unknown
//	                             or duplicated field, an unknown apiVersion/kind, a missing or
//	                             malformed name or label fails. One line per object.
//	manifestcheck compose FILE   a compose file loaded by the Compose specification's own loader
//	                             (schema validation, interpolation from the environment,
//	                             references between services; the profiles of COMPOSE_PROFILES),
//	                             printed normalized as YAML.
//
// Exit status 1 when anything fails, 2 on wrong usage. No cluster, engine or network is needed.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/compose-spec/compose-go/v2/cli"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "k8s":
		path := "-"
		if len(os.Args) > 2 {
			path = os.Args[2]
		}
		err = checkKubernetes(path, os.Stdout)
	case "compose":
		if len(os.Args) != 3 {
			usage()
		}
		err = checkCompose(os.Args[2], os.Stdout)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "manifestcheck:", oneLine(err.Error()))
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: manifestcheck k8s [FILE|-] | manifestcheck compose FILE")
	os.Exit(2)
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func open(path string) (io.ReadCloser, error) {
	if path == "-" {
		return io.NopCloser(os.Stdin), nil
	}
	return os.Open(path)
}

// kubeScheme knows the built-in API types and the Prometheus Operator's monitoring.coreos.com/v1.
func kubeScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := scheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := monitoringv1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

func checkKubernetes(path string, out io.Writer) error {
	in, err := open(path)
	if err != nil {
		return err
	}
	defer in.Close()
	s, err := kubeScheme()
	if err != nil {
		return err
	}
	strict := serializer.NewCodecFactory(s, serializer.EnableStrict).UniversalDeserializer()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(in))
	failed, objects := 0, 0
	for index := 0; ; index++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("document %d: %w", index, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		objects++
		line, err := checkObject(strict, s, doc)
		if err != nil {
			failed++
			fmt.Fprintf(out, "FAIL document %d %s: %s\n", index, line, oneLine(err.Error()))
			continue
		}
		fmt.Fprintf(out, "ok %s\n", line)
	}
	if objects == 0 {
		return errors.New("no object in the input")
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d objects failed", failed, objects)
	}
	return nil
}

func stripComments(doc []byte) []byte {
	var kept [][]byte
	for _, l := range bytes.Split(doc, []byte("\n")) {
		if t := bytes.TrimSpace(l); len(t) > 0 && t[0] != '#' {
			kept = append(kept, l)
		}
	}
	return bytes.Join(kept, []byte("\n"))
}

func checkObject(strict runtime.Decoder, s *runtime.Scheme, doc []byte) (string, error) {
	raw, err := yaml.YAMLToJSONStrict(doc) // duplicated keys fail here
	if err != nil {
		return "(unreadable)", err
	}
	var meta struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		return "(unreadable)", err
	}
	line := fmt.Sprintf("%s %s %s", meta.APIVersion, meta.Kind, meta.Metadata.Name)
	gv, err := schema.ParseGroupVersion(meta.APIVersion)
	if err != nil || meta.Kind == "" {
		return line, fmt.Errorf("no apiVersion/kind")
	}
	if !s.Recognizes(gv.WithKind(meta.Kind)) {
		return line, fmt.Errorf("unknown apiVersion/kind %s %s", meta.APIVersion, meta.Kind)
	}
	obj, _, err := strict.Decode(raw, nil, nil)
	if err != nil {
		return line, err
	}
	accessor, err := metaOf(obj)
	if err != nil {
		return line, err
	}
	if accessor.GetName() == "" {
		return line, errors.New("metadata.name is missing")
	}
	if problems := validation.IsDNS1123Subdomain(accessor.GetName()); len(problems) > 0 {
		return line, fmt.Errorf("metadata.name: %s", strings.Join(problems, "; "))
	}
	for key, value := range accessor.GetLabels() {
		if problems := validation.IsQualifiedName(key); len(problems) > 0 {
			return line, fmt.Errorf("label %q: %s", key, strings.Join(problems, "; "))
		}
		if problems := validation.IsValidLabelValue(value); len(problems) > 0 {
			return line, fmt.Errorf("label %q value %q: %s", key, value, strings.Join(problems, "; "))
		}
	}
	return line, nil
}

func metaOf(obj runtime.Object) (metav1.Object, error) {
	accessor, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no object metadata", obj)
	}
	return accessor, nil
}

func checkCompose(path string, out io.Writer) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	options, err := cli.NewProjectOptions([]string{abs},
		cli.WithOsEnv,
		cli.WithWorkingDirectory(filepath.Dir(abs)),
		cli.WithName("gpuledger"),
		cli.WithResolvedPaths(true),
		cli.WithDefaultProfiles(), // COMPOSE_PROFILES, as docker compose reads it
		cli.WithConsistency(true),
	)
	if err != nil {
		return err
	}
	project, err := options.LoadProject(context.Background())
	if err != nil {
		return err
	}
	text, err := project.MarshalYAML()
	if err != nil {
		return err
	}
	_, err = out.Write(text)
	return err
}
