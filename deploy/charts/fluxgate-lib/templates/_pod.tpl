{{/*
The pod template every workload shares. A service chart passes extra environment
(downward-API values such as the pod's name or index) as .extraEnv, extra volumes and
mounts as .volumes/.volumeMounts, in a dict with the chart's context as .ctx.
*/}}
{{- define "fluxgate.podTemplate" -}}
{{- $ctx := .ctx -}}
{{- $v := $ctx.Values -}}
metadata:
  labels:
    {{- include "fluxgate.selectorLabels" $ctx | nindent 4 }}
    {{- with $v.podLabels }}{{ toYaml . | nindent 4 }}{{ end }}
  annotations:
    checksum/config: {{ include "fluxgate.settings" $ctx | sha256sum }}
    {{- with $v.podAnnotations }}{{ toYaml . | nindent 4 }}{{ end }}
spec:
  {{- with $v.imagePullSecrets }}
  imagePullSecrets: {{ toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.serviceAccountName }}
  serviceAccountName: {{ . }}
  {{- end }}
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: {{ $v.terminationGracePeriodSeconds }}
  securityContext:
    {{- toYaml $v.podSecurityContext | nindent 4 }}
  {{- if $v.topologySpread.enabled }}
  topologySpreadConstraints:
    {{- range $v.topologySpread.topologyKeys }}
    - maxSkew: {{ $v.topologySpread.maxSkew }}
      topologyKey: {{ . }}
      whenUnsatisfiable: {{ $v.topologySpread.whenUnsatisfiable }}
      labelSelector:
        matchLabels:
          {{- include "fluxgate.selectorLabels" $ctx | nindent 10 }}
    {{- end }}
  {{- end }}
  {{- with $v.nodeSelector }}
  nodeSelector: {{ toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.affinity }}
  affinity: {{ toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.tolerations }}
  tolerations: {{ toYaml . | nindent 4 }}
  {{- end }}
  containers:
    - name: {{ include "fluxgate.name" $ctx }}
      image: {{ include "fluxgate.image" $ctx }}
      imagePullPolicy: {{ $v.image.pullPolicy }}
      command: {{ toJson $v.command }}
      {{- with $v.args }}
      args: {{ toJson . }}
      {{- end }}
      ports:
        - name: http
          containerPort: {{ $v.httpPort }}
          protocol: TCP
      envFrom:
        - configMapRef:
            name: {{ include "fluxgate.fullname" $ctx }}
      env:
        - name: POD_NAME
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
        - name: POD_NAMESPACE
          valueFrom:
            fieldRef:
              fieldPath: metadata.namespace
        {{- with .extraEnv }}{{ toYaml . | nindent 8 }}{{ end }}
        {{- include "fluxgate.secretEnv" $ctx | nindent 8 }}
        {{- with $v.extraEnv }}{{ toYaml . | nindent 8 }}{{ end }}
      {{- with $v.probes.startup }}
      {{- if .enabled }}
      startupProbe:
        httpGet: {path: {{ .path }}, port: http}
        periodSeconds: {{ .periodSeconds }}
        timeoutSeconds: {{ .timeoutSeconds }}
        failureThreshold: {{ .failureThreshold }}
      {{- end }}
      {{- end }}
      livenessProbe:
        httpGet: {path: {{ $v.probes.liveness.path }}, port: http}
        periodSeconds: {{ $v.probes.liveness.periodSeconds }}
        timeoutSeconds: {{ $v.probes.liveness.timeoutSeconds }}
        failureThreshold: {{ $v.probes.liveness.failureThreshold }}
      readinessProbe:
        httpGet: {path: {{ $v.probes.readiness.path }}, port: http}
        periodSeconds: {{ $v.probes.readiness.periodSeconds }}
        timeoutSeconds: {{ $v.probes.readiness.timeoutSeconds }}
        failureThreshold: {{ $v.probes.readiness.failureThreshold }}
      resources:
        {{- toYaml $v.resources | nindent 8 }}
      securityContext:
        {{- toYaml $v.securityContext | nindent 8 }}
      volumeMounts:
        - name: tmp
          mountPath: /tmp
        {{- include "fluxgate.secretFilesMount" $ctx | nindent 8 }}
        {{- with .volumeMounts }}{{ toYaml . | nindent 8 }}{{ end }}
        {{- with $v.extraVolumeMounts }}{{ toYaml . | nindent 8 }}{{ end }}
  volumes:
    - name: tmp
      emptyDir:
        sizeLimit: {{ $v.tmpSizeLimit }}
    {{- include "fluxgate.secretFilesVolume" $ctx | nindent 4 }}
    {{- with .volumes }}{{ toYaml . | nindent 4 }}{{ end }}
    {{- with $v.extraVolumes }}{{ toYaml . | nindent 4 }}{{ end }}
{{- end -}}
