{{/* Names: the release's full name, cut to 63 characters (a DNS label). */}}
{{- define "asg.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "asg.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* A component's name: <fullname>-<suffix>, the suffix kept whole. */}}
{{- define "asg.componentName" -}}
{{- $root := index . 0 -}}
{{- $suffix := index . 1 -}}
{{- printf "%s-%s" (include "asg.fullname" $root | trunc (int (sub 62 (len $suffix))) | trimSuffix "-") $suffix -}}
{{- end -}}

{{- define "asg.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "asg.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: animal-store
{{- end -}}

{{/* Selector labels of one component (gateway or inventory); never change across upgrades. */}}
{{- define "asg.selectorLabels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ include "asg.name" $root }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "asg.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "asg.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "asg.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "asg.secretName" -}}
{{- default (include "asg.componentName" (list . "secrets")) .Values.secrets.existingSecret -}}
{{- end -}}

{{/*
WORKERS from the gateway's CPU request: whole CPUs, rounded down, at least 1. A quantity is a
number ("2", 2, "1.5") or millicores ("1500m").
*/}}
{{- define "asg.workers" -}}
{{- $cpu := toString .Values.gateway.resources.requests.cpu -}}
{{- $milli := 0 -}}
{{- if hasSuffix "m" $cpu -}}
{{- $milli = trimSuffix "m" $cpu | int -}}
{{- else -}}
{{- $milli = mulf (float64 $cpu) 1000 | floor | int -}}
{{- end -}}
{{- max 1 (div $milli 1000) -}}
{{- end -}}

{{/* The inventory's URL as the gateway reaches it. */}}
{{- define "asg.inventoryUrl" -}}
{{- if .Values.inventory.enabled -}}
{{- printf "http://%s:8090" (include "asg.componentName" (list . "inventory")) -}}
{{- else -}}
{{- required "inventory.upstreamUrl is required when inventory.enabled is false" .Values.inventory.upstreamUrl -}}
{{- end -}}
{{- end -}}

{{/* Where each secret file is mounted; the variables name these paths. */}}
{{- define "asg.secretDir" -}}/run/secrets/asg{{- end -}}

{{/* The pod and container security settings both workloads share: non-root, read-only root. */}}
{{- define "asg.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 1000
runAsGroup: 1000
fsGroup: 1000
fsGroupChangePolicy: OnRootMismatch
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "asg.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 1000
runAsGroup: 1000
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
privileged: false
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* The config file the ConfigMap carries (CONFIG_FILE). */}}
{{- define "asg.configFile" -}}/etc/asg/config.yaml{{- end -}}
