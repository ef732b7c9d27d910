{{/* The release's name prefix: the release name, or release-chart when the chart's name is not in it. */}}
{{- define "warmpod.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Labels of every object but the pool pods (whose template must not change with the chart's version:
     that would roll every pool on every upgrade). */}}
{{- define "warmpod.labels" -}}
app.kubernetes.io/name: warmpod
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "warmpod.podSA" -}}
{{- default (printf "%s-pod" (include "warmpod.fullname" .)) .Values.serviceAccount.name -}}
{{- end -}}
{{- define "warmpod.gitlabSA" -}}
{{- default (printf "%s-gitlab" (include "warmpod.fullname" .)) .Values.gitlab.serviceAccount.name -}}
{{- end -}}
{{- define "warmpod.githubSA" -}}
{{- default (printf "%s-github" (include "warmpod.fullname" .)) .Values.github.serviceAccount.name -}}
{{- end -}}
{{- /* The drivers' --offers: the controller's offers Service (controller.yaml), by its in-cluster name. */ -}}
{{- define "warmpod.offersURL" -}}
{{- printf "http://%s-pools-offers.%s:%v" (include "warmpod.fullname" .) .Release.Namespace .Values.controller.metrics.port -}}
{{- end -}}
{{- define "warmpod.poolsSA" -}}
{{- default (printf "%s-pools" (include "warmpod.fullname" .)) .Values.controller.serviceAccount.name -}}
{{- end -}}

{{- define "warmpod.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- define "warmpod.executorImage" -}}
{{- printf "%s:%s" .Values.executorImage.repository (default .Chart.AppVersion .Values.executorImage.tag) -}}
{{- end -}}
{{- define "warmpod.gitlabRunnerImage" -}}
{{- printf "%s:%s" .Values.gitlab.runnerImage.repository .Values.gitlab.runnerImage.tag -}}
{{- end -}}
