{{/* The job for the Spark operator (sparkoperator.k8s.io/v1beta2): the driver runs the CLI's `run`, with the same settings as the Deployment. */}}
{{- define "fluxgate.aggregator.sparkApplication" -}}
{{- $v := .ctx.Values -}}
{{- $s := $v.sparkApplication -}}
{{- if not $s.image }}{{ fail "sparkApplication.image: an image with Spark's Kubernetes entry point and the aggregator installed (deploy/README.md)" }}{{ end -}}
{{- $pod := dict "envFrom" (list (dict "configMapRef" (dict "name" (include "fluxgate.fullname" .ctx)))) "env" (concat .env (include "fluxgate.secretEnv" .ctx | default "[]" | fromYamlArray)) "volumeMounts" .mounts "securityContext" $v.securityContext -}}
apiVersion: sparkoperator.k8s.io/v1beta2
kind: SparkApplication
metadata:
  name: {{ include "fluxgate.fullname" .ctx }}
  labels:
    {{- include "fluxgate.labels" .ctx | nindent 4 }}
spec:
  type: Python
  pythonVersion: "3"
  mode: cluster
  image: {{ $s.image }}
  imagePullPolicy: {{ $v.image.pullPolicy }}
  mainApplicationFile: {{ $s.mainApplicationFile }}
  arguments: {{ toJson $v.args }}
  sparkVersion: {{ $s.sparkVersion | quote }}
  restartPolicy:
    type: Always
    onFailureRetryInterval: 10
    onSubmissionFailureRetryInterval: 20
  deps:
    packages: {{ toJson $s.packages }}
  {{- with $s.sparkConf }}
  sparkConf: {{ toYaml . | nindent 4 }}
  {{- end }}
  {{- with .volumes }}
  volumes: {{ toYaml . | nindent 4 }}
  {{- end }}
  driver:
    cores: {{ $s.driver.cores }}
    memory: {{ $s.driver.memory | quote }}
    serviceAccount: {{ $s.serviceAccount }}
    labels: {{- include "fluxgate.aggregator.sparkPodLabels" (dict "ctx" .ctx "role" "driver") | nindent 6 }}
    {{- toYaml $pod | nindent 4 }}
  executor:
    instances: {{ $s.executor.instances }}
    cores: {{ $s.executor.cores }}
    memory: {{ $s.executor.memory | quote }}
    labels: {{- include "fluxgate.aggregator.sparkPodLabels" (dict "ctx" .ctx "role" "executor") | nindent 6 }}
    {{- toYaml $pod | nindent 4 }}
{{- end -}}

{{/*
The labels the chart gives a Spark pod of the job (.role: driver or executor), set by the
chart rather than relying on the operator's own (spark-role, sparkoperator.k8s.io/app-name),
which its versions may change. Only the driver serves HTTP: its Service picks it by role.
*/}}
{{- define "fluxgate.aggregator.sparkPodLabels" -}}
{{ include "fluxgate.selectorLabels" .ctx }}
app.kubernetes.io/component: spark-{{ .role }}
{{- end -}}
