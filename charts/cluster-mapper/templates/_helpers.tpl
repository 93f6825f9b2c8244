{{/*
Labels of every object: the part-of label that `kubectl get -l app.kubernetes.io/part-of=cluster-mapper`
finds, the component's name when given, and Helm's standard labels unless .Values.helmLabels is false.
Call: include "cluster-mapper.labels" (list $ "mapper-apiserver")
*/}}
{{- define "cluster-mapper.labels" -}}
{{- $root := index . 0 -}}
{{- $l := dict "app.kubernetes.io/part-of" "cluster-mapper" -}}
{{- with index . 1 }}{{ $_ := set $l "app.kubernetes.io/name" . }}{{ end -}}
{{- if $root.Values.helmLabels -}}
{{- $_ := set $l "app.kubernetes.io/instance" $root.Release.Name -}}
{{- $_ := set $l "app.kubernetes.io/managed-by" $root.Release.Service -}}
{{- $_ := set $l "app.kubernetes.io/version" ($root.Values.image.tag | toString) -}}
{{- $_ := set $l "helm.sh/chart" (printf "%s-%s" $root.Chart.Name $root.Chart.Version) -}}
{{- end -}}
{{- toYaml $l -}}
{{- end }}

{{/*
The image of a command. Call: include "cluster-mapper.image" (list $ "mapper-apiserver")
*/}}
{{- define "cluster-mapper.image" -}}
{{- $root := index . 0 -}}
{{- printf "%s/%s:%s" $root.Values.image.prefix (index . 1) $root.Values.image.tag -}}
{{- end }}

{{/*
The namespace of the locations' Leases and of mapper-controller (docs/design.md, "Names").
*/}}
{{- define "cluster-mapper.controlNamespace" -}}
cluster-mapper-system
{{- end }}

{{/*
RBAC rules over resources given as resource.group (core resources without a group), one rule per
group. Call: include "cluster-mapper.rules" (dict "resources" $list "verbs" $verbs "subresource" "status")
With subresource, the rule names <resource>/<subresource> instead. An empty list grants "*".
*/}}
{{- define "cluster-mapper.rules" -}}
{{- $groups := dict -}}
{{- range .resources -}}
{{- $parts := splitn "." 2 . -}}
{{- $group := default "" $parts._1 -}}
{{- $_ := set $groups $group (append (get $groups $group | default list) $parts._0) -}}
{{- end -}}
{{- if not .resources }}
- apiGroups: ["*"]
  resources: [{{ if .subresource }}{{ printf "*/%s" .subresource | quote }}{{ else }}"*"{{ end }}]
  verbs: {{ toJson .verbs }}
{{- end }}
{{- $sub := .subresource -}}
{{- range $group := keys $groups | sortAlpha }}
- apiGroups: [{{ $group | quote }}]
  resources:
  {{- range get $groups $group }}
  - {{ if $sub }}{{ printf "%s/%s" . $sub }}{{ else }}{{ . }}{{ end }}
  {{- end }}
  verbs: {{ toJson $.verbs }}
{{- end }}
{{- end }}

{{/*
The volume and mount of the source kubeconfig Secret, and the flag naming it. Call with the
flag's name: include "cluster-mapper.sourceKubeconfigFlag" (list $ "--source-kubeconfig")
*/}}
{{- define "cluster-mapper.sourceKubeconfigFlag" -}}
{{- $root := index . 0 -}}
{{- if $root.Values.source.kubeconfigSecret.name -}}
- {{ index . 1 }}=/etc/cluster-mapper/source/{{ $root.Values.source.kubeconfigSecret.key }}
{{- end }}
{{- end }}

{{- define "cluster-mapper.sourceKubeconfigMount" -}}
{{- if .Values.source.kubeconfigSecret.name -}}
- name: source-kubeconfig
  mountPath: /etc/cluster-mapper/source
  readOnly: true
{{- end }}
{{- end }}

{{- define "cluster-mapper.sourceKubeconfigVolume" -}}
{{- if .Values.source.kubeconfigSecret.name -}}
- name: source-kubeconfig
  secret:
    secretName: {{ .Values.source.kubeconfigSecret.name }}
{{- end }}
{{- end }}

{{/*
The pod-level settings both Deployments share: non-root, the runtime's seccomp profile.
*/}}
{{- define "cluster-mapper.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "cluster-mapper.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end }}

{{/*
Image pull secrets, nodeSelector, tolerations of a pod. Call with the component's values:
include "cluster-mapper.scheduling" (list $ .Values.apiserver)
*/}}
{{- define "cluster-mapper.scheduling" -}}
{{- $root := index . 0 -}}
{{- $c := index . 1 -}}
{{- with $root.Values.image.pullSecrets -}}
imagePullSecrets:
{{- range . }}
- name: {{ . }}
{{- end }}
{{- end }}
{{- with $c.nodeSelector }}
nodeSelector:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- with $c.tolerations }}
tolerations:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
The flags saying how the source is read (--source-mode, --cluster-name, --source-cluster-path),
the same for mapper-apiserver and mapper-controller, which must agree on them.
*/}}
{{- define "cluster-mapper.sourceModeFlags" -}}
- --source-mode={{ .Values.source.mode }}
{{- if eq .Values.source.mode "plain" }}
- --cluster-name={{ .Values.source.clusterName }}
{{- else if .Values.source.clusterPath }}
- --source-cluster-path={{ .Values.source.clusterPath }}
{{- end }}
{{- end }}
