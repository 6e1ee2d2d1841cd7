{{/* The chart's name, and the name of its objects: the release name, suffixed with the chart's unless it contains it. */}}
{{- define "clusterscaler.name" -}}
{{- .Values.nameOverride | default .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "clusterscaler.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "clusterscaler.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "clusterscaler.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "clusterscaler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "clusterscaler.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "clusterscaler.labels" -}}
{{ include "clusterscaler.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The ServiceAccount: the name CA's manifests use unless set. */}}
{{- define "clusterscaler.serviceAccountName" -}}
{{- .Values.rbac.serviceAccount.name | default "cluster-autoscaler" -}}
{{- end -}}

{{/* The Lease and status ConfigMap names, as the flags set them (their defaults otherwise). */}}
{{- define "clusterscaler.leaseName" -}}
{{- index .Values.extraArgs "leader-elect-resource-name" | default "cluster-autoscaler" -}}
{{- end -}}

{{- define "clusterscaler.statusConfigMapName" -}}
{{- index .Values.extraArgs "status-config-map-name" | default "cluster-autoscaler-status" -}}
{{- end -}}

{{/* machineapi and clusterapi name the same provider. */}}
{{- define "clusterscaler.isClusterAPI" -}}
{{- if or (eq .Values.cloudProvider "clusterapi") (eq .Values.cloudProvider "machineapi") }}true{{ end -}}
{{- end -}}

{{/* A Cluster API label selector, key=value pairs joined by commas. */}}
{{- define "clusterscaler.labelSelector" -}}
{{- range $key, $value := . }}{{ $key }}={{ $value }},{{ end -}}
{{- end -}}
