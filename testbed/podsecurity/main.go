// Command podsecurity judges the pod templates of Kubernetes manifests by the Pod Security Standards,
// with Kubernetes' own evaluator (k8s.io/pod-security-admission/policy: the code the API server's
// PodSecurity admission runs). testbed/peers.py builds it at the pinned module version; the tests run
// it on every manifest `store-metrics export` writes.
//
//	podsecurity [--level restricted] [--policy-version latest] FILE...
//	podsecurity --version
//
// One JSON object a line for every object that holds a pod (Pod, Deployment, StatefulSet, DaemonSet,
// ReplicaSet, Job, CronJob): file, kind, name, allowed, and the checks it fails. Exit 0 when every pod
// is allowed, 1 when one is not, 2 on a usage or read error.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/yaml"
)

// version is the pinned module version, set at build time (-X main.version=...).
var version = "unknown"

type finding struct {
	Reason string `json:"reason"`
	Detail string `json:"detail"`
}

type verdict struct {
	File      string    `json:"file"`
	Kind      string    `json:"kind"`
	Name      string    `json:"name"`
	Level     string    `json:"level"`
	Allowed   bool      `json:"allowed"`
	Forbidden []finding `json:"forbidden"`
}

// podOf returns the pod metadata and spec an object creates, or nil for an object without pods.
func podOf(kind string, doc []byte) (*metav1.ObjectMeta, *corev1.PodSpec, string, error) {
	switch kind {
	case "Pod":
		var o corev1.Pod
		err := yaml.Unmarshal(doc, &o)
		return &o.ObjectMeta, &o.Spec, o.Name, err
	case "Deployment":
		var o appsv1.Deployment
		err := yaml.Unmarshal(doc, &o)
		return &o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec, o.Name, err
	case "StatefulSet":
		var o appsv1.StatefulSet
		err := yaml.Unmarshal(doc, &o)
		return &o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec, o.Name, err
	case "DaemonSet":
		var o appsv1.DaemonSet
		err := yaml.Unmarshal(doc, &o)
		return &o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec, o.Name, err
	case "ReplicaSet":
		var o appsv1.ReplicaSet
		err := yaml.Unmarshal(doc, &o)
		return &o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec, o.Name, err
	case "Job":
		var o batchv1.Job
		err := yaml.Unmarshal(doc, &o)
		return &o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec, o.Name, err
	case "CronJob":
		var o batchv1.CronJob
		err := yaml.Unmarshal(doc, &o)
		return &o.Spec.JobTemplate.Spec.Template.ObjectMeta, &o.Spec.JobTemplate.Spec.Template.Spec, o.Name, err
	}
	return nil, nil, "", nil
}

func judge(path string, evaluator policy.Evaluator, lv api.LevelVersion, out *json.Encoder) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	reader := k8syaml.NewYAMLReader(bufio.NewReader(f))
	allowed := true
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return allowed, nil
		}
		if err != nil {
			return false, fmt.Errorf("%s: %w", path, err)
		}
		var head metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &head); err != nil {
			return false, fmt.Errorf("%s: %w", path, err)
		}
		meta, spec, name, err := podOf(head.Kind, doc)
		if err != nil {
			return false, fmt.Errorf("%s: %s: %w", path, head.Kind, err)
		}
		if spec == nil {
			continue
		}
		v := verdict{File: path, Kind: head.Kind, Name: name, Level: string(lv.Level), Allowed: true, Forbidden: []finding{}}
		for _, result := range evaluator.EvaluatePod(lv, meta, spec) {
			if !result.Allowed {
				v.Allowed = false
				v.Forbidden = append(v.Forbidden, finding{Reason: result.ForbiddenReason, Detail: result.ForbiddenDetail})
			}
		}
		allowed = allowed && v.Allowed
		if err := out.Encode(v); err != nil {
			return false, err
		}
	}
}

func main() {
	level := flag.String("level", "restricted", "the Pod Security Standards level: privileged, baseline or restricted")
	versionFlag := flag.String("policy-version", "latest", "the policy version: latest or v1.N")
	showVersion := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *showVersion {
		fmt.Printf("podsecurity (k8s.io/pod-security-admission) version %s\n", version)
		return
	}
	parsedLevel, err := api.ParseLevel(*level)
	if err != nil {
		fmt.Fprintln(os.Stderr, "podsecurity:", err)
		os.Exit(2)
	}
	parsedVersion, err := api.ParseVersion(*versionFlag)
	if err != nil {
		fmt.Fprintln(os.Stderr, "podsecurity:", err)
		os.Exit(2)
	}
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "podsecurity:", err)
		os.Exit(2)
	}
	lv := api.LevelVersion{Level: parsedLevel, Version: parsedVersion}
	out := json.NewEncoder(os.Stdout)
	ok := true
	for _, path := range flag.Args() {
		allowed, err := judge(path, evaluator, lv, out)
		if err != nil {
			fmt.Fprintln(os.Stderr, "podsecurity:", err)
			os.Exit(2)
		}
		ok = ok && allowed
	}
	if !ok {
		os.Exit(1)
	}
}
