{{/* The chart name, or nameOverride. */}}
{{- define "backlog-scaler.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The full name: fullnameOverride, the release name when it already holds the chart name, else RELEASE-NAME. */}}
{{- define "backlog-scaler.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "backlog-scaler.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selects the scaler's pods: stable across upgrades (a Deployment's selector is immutable). */}}
{{- define "backlog-scaler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "backlog-scaler.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Every object's labels: the kustomize base's three, Helm's, and additionalLabels. */}}
{{- define "backlog-scaler.labels" -}}
{{ include "backlog-scaler.selectorLabels" . }}
app.kubernetes.io/component: external-scaler
app.kubernetes.io/part-of: keda
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ include "backlog-scaler.chart" . }}
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
An object's metadata: name, namespace, labels (+ .labels) and annotations
(additionalAnnotations + .annotations). Call with
(dict "root" $ "name" NAME ["namespace" NS] ["labels" DICT] ["annotations" DICT]).
*/}}
{{- define "backlog-scaler.metadata" -}}
name: {{ .name }}
namespace: {{ .namespace | default .root.Release.Namespace }}
labels:
  {{- include "backlog-scaler.labels" .root | nindent 2 }}
  {{- with .labels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- with merge (dict) (.annotations | default dict) (.root.Values.additionalAnnotations | default dict) }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- define "backlog-scaler.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "backlog-scaler.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* "true" when gRPC is served over TLS. */}}
{{- define "backlog-scaler.tls" -}}
{{- if or .Values.certificates.enabled .Values.certificates.certManager.enabled }}true{{ end }}
{{- end }}

{{- define "backlog-scaler.tlsSecretName" -}}
{{- default (printf "%s-tls" (include "backlog-scaler.fullname" .)) .Values.certificates.secretName }}
{{- end }}

{{/* Fixed paths inside the pod; the config's {file: ...} references point here. */}}
{{- define "backlog-scaler.configDir" -}}/etc/backlog-scaler{{- end }}
{{- define "backlog-scaler.brokersDir" -}}/var/run/secrets/backlog-scaler/brokers{{- end }}
{{- define "backlog-scaler.prometheusTokenDir" -}}/var/run/secrets/backlog-scaler/prometheus{{- end }}
{{- define "backlog-scaler.tlsDir" -}}/var/run/secrets/backlog-scaler/tls{{- end }}
