{{/*
The name of the release's objects: the release name, which must be a DNS-1123 label (one
mapper per location and release; `helm install mapper-east charts/mapper`).
*/}}
{{- define "mapper.name" -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end }}

{{- define "mapper.labels" -}}
{{- $l := dict "app.kubernetes.io/name" "mapper" "app.kubernetes.io/part-of" "cluster-mapper" -}}
{{- if .Values.helmLabels -}}
{{- $_ := set $l "app.kubernetes.io/instance" .Release.Name -}}
{{- $_ := set $l "app.kubernetes.io/managed-by" .Release.Service -}}
{{- $_ := set $l "app.kubernetes.io/version" (.Values.image.tag | toString) -}}
{{- $_ := set $l "helm.sh/chart" (printf "%s-%s" .Chart.Name .Chart.Version) -}}
{{- end -}}
{{- toYaml $l -}}
{{- end }}

{{/*
The Deployment's selector: the name, and the release when Helm's labels are on.
*/}}
{{- define "mapper.selector" -}}
{{- $l := dict "app.kubernetes.io/name" "mapper" -}}
{{- if .Values.helmLabels }}{{ $_ := set $l "app.kubernetes.io/instance" .Release.Name }}{{ end -}}
{{- toYaml $l -}}
{{- end }}
