{{/* Names and labels shared by the pebsprof chart's templates. */}}

{{- define "pebsprof.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release name alone when it already names the chart, as most charts do. */}}
{{- define "pebsprof.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "pebsprof.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "pebsprof.namespace" -}}
{{- default .Release.Namespace .Values.namespace -}}
{{- end -}}

{{- define "pebsprof.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "pebsprof.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* No helm.sh/chart or managed-by labels: the objects equal deploy/kubernetes/. */}}
{{- define "pebsprof.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pebsprof.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "pebsprof.labels" -}}
{{ include "pebsprof.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: agent
{{- end -}}

{{- define "pebsprof.image" -}}
{{- printf "%s:%s" (required "image.repository is required" .Values.image.repository) (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "pebsprof.capabilities" -}}
{{- $caps := list "BPF" "PERFMON" -}}
{{- if .Values.legacyKernel -}}
{{- $caps = list "SYS_ADMIN" "SYS_RESOURCE" -}}
{{- end -}}
{{- $caps = concat $caps (list "SYS_PTRACE" "DAC_READ_SEARCH") -}}
{{- if not .Values.legacyKernel -}}
{{- $caps = append $caps "CHECKPOINT_RESTORE" -}}
{{- end -}}
{{- $caps = concat $caps .Values.extraCapabilities -}}
[{{ join ", " $caps }}]
{{- end -}}
