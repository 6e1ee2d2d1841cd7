{{/*
Names: as Cluster Autoscaler's chart makes them, so that a release switched from it keeps its
ServiceAccount (IRSA and workload-identity bindings name it), Service and Lease holders.
name: nameOverride, else <cloudProvider>-cluster-autoscaler.
fullname: fullnameOverride, else <release>-<name>, or <name> when the release is so named.
*/}}
{{- define "clusterscaler.name" -}}
{{- default (printf "%s-cluster-autoscaler" .Values.cloudProvider) .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "clusterscaler.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "clusterscaler.name" . -}}
{{- if eq $name .Release.Name -}}
{{- $name -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "clusterscaler.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The labels that select the pod. */}}
{{- define "clusterscaler.selectorLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/name: {{ include "clusterscaler.name" . | quote }}
{{- end -}}

{{- define "clusterscaler.labels" -}}
{{ include "clusterscaler.selectorLabels" . }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
helm.sh/chart: {{ include "clusterscaler.chart" . | quote }}
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Annotations of roles, bindings and the ServiceAccount: keys and values through tpl. */}}
{{- define "clusterscaler.tplAnnotations" -}}
{{- range $key, $value := .annotations }}
{{ tpl $key $.root }}: {{ tpl (toString $value) $.root | quote }}
{{- end }}
{{- end -}}

{{/* The ServiceAccount: the fullname when the chart creates it, else `default`, unless named. */}}
{{- define "clusterscaler.serviceAccountName" -}}
{{- if .Values.rbac.serviceAccount.create -}}
{{- default (include "clusterscaler.fullname" .) .Values.rbac.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.rbac.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The Secret the provider credentials are read from. */}}
{{- define "clusterscaler.secretName" -}}
{{- default (include "clusterscaler.fullname" .) .Values.secretKeyRefNameOverride -}}
{{- end -}}

{{/* The Lease and status ConfigMap names, as the flags set them (their defaults otherwise). */}}
{{- define "clusterscaler.leaseName" -}}
{{- index .Values.extraArgs "leader-elect-resource-name" | default "cluster-autoscaler" -}}
{{- end -}}

{{- define "clusterscaler.statusConfigMapName" -}}
{{- index .Values.extraArgs "status-config-map-name" | default "cluster-autoscaler-status" -}}
{{- end -}}

{{/* "true" when extraArgs.expander lists the priority expander. */}}
{{- define "clusterscaler.priorityExpanderEnabled" -}}
{{- if has "priority" (splitList "," (toString (default "" .Values.extraArgs.expander))) -}}true{{- end -}}
{{- end -}}

{{/* machineapi and clusterapi name the same provider. */}}
{{- define "clusterscaler.isClusterAPI" -}}
{{- if has .Values.cloudProvider (list "clusterapi" "machineapi") }}true{{ end -}}
{{- end -}}

{{/* "true" when the Cluster API objects live in the cluster the pod runs in. */}}
{{- define "clusterscaler.clusterAPIInCluster" -}}
{{- if and (include "clusterscaler.isClusterAPI" .) (has .Values.clusterAPIMode (list "incluster-incluster" "kubeconfig-incluster")) }}true{{ end -}}
{{- end -}}

{{/* clusterapi discovery: clusterName=, namespace= and the label pairs, joined by commas. */}}
{{- define "clusterscaler.clusterAPIDiscovery" -}}
{{- $parts := list -}}
{{- with .Values.autoDiscovery.clusterName }}{{ $parts = append $parts (printf "clusterName=%s" (tpl (toString .) $)) }}{{ end -}}
{{- with .Values.autoDiscovery.namespace }}{{ $parts = append $parts (printf "namespace=%s" (toString .)) }}{{ end -}}
{{- range .Values.autoDiscovery.labels }}{{ range $key, $value := . }}{{ $parts = append $parts (printf "%s=%s" $key (toString $value)) }}{{ end }}{{ end -}}
{{- join "," $parts -}}
{{- end -}}

{{/*
One flag from an extraArgs entry: the key up to its first `_` (so that a flag can repeat),
`--key` alone for a null value, and whole numbers printed whole (YAML numbers reach templates
as floats, which print 1000000 as 1e+06).
*/}}
{{- define "clusterscaler.flag" -}}
{{- $name := regexFind "^[^_]+" .key -}}
{{- if kindIs "invalid" .value -}}
--{{ $name }}
{{- else if and (kindIs "float64" .value) (eq .value (floor .value)) -}}
--{{ $name }}={{ .value | int64 }}
{{- else -}}
--{{ $name }}={{ .value }}
{{- end -}}
{{- end -}}

{{/*
The Cluster API / Machine API provider's rules (docs/providers/machineapi.md). List+watch
caches of OpenShift Machine API MachineSets and Cluster API MachineSets / MachineDeployments /
MachinePools, of their Machines and of the Clusters (for their pause); scaling through their
scale subresource (read, then merge patch); Machines to delete marked with an annotation
(merge patch). Scale from zero reads, for Cluster API, the infrastructure machine template a
group references (any kind of the infrastructure.cluster.x-k8s.io group: the kinds depend on
the infrastructure provider). clusterapi.group (CAPI_GROUP) replaces cluster.x-k8s.io.
*/}}
{{- define "clusterscaler.clusterAPIRules" -}}
{{- $group := .Values.clusterapi.group | default "cluster.x-k8s.io" -}}
- apiGroups: [{{ $group | quote }}]
  resources: ["machinedeployments", "machinesets", "machinepools", "machines", "clusters"]
  verbs: ["list", "watch"]
- apiGroups: [{{ $group | quote }}]
  resources: ["machines"]
  verbs: ["patch"]
- apiGroups: [{{ $group | quote }}]
  resources: ["machinedeployments/scale", "machinesets/scale", "machinepools/scale"]
  verbs: ["get", "patch"]
- apiGroups: ["infrastructure.cluster.x-k8s.io"]
  resources: ["*"]
  verbs: ["get"]
- apiGroups: ["machine.openshift.io"]
  resources: ["machinesets", "machines"]
  verbs: ["list", "watch"]
- apiGroups: ["machine.openshift.io"]
  resources: ["machines"]
  verbs: ["patch"]
- apiGroups: ["machine.openshift.io"]
  resources: ["machinesets/scale"]
  verbs: ["get", "patch"]
{{- end -}}
