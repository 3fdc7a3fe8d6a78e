{{/*
What every Fluxgate pod has unless the service chart's values say otherwise (merged under
.Values, which wins): a non-root user with a read-only root filesystem, no privilege
escalation and no capabilities, probes on /healthz and /readyz, spread over nodes, a
PodDisruptionBudget, and a PodMonitor to switch on. deploy/README.md lists them.
*/}}
{{- define "fluxgate.defaults" -}}
nameOverride: ""
fullnameOverride: ""
global: {}
image:
  pullPolicy: IfNotPresent
  tag: ""
imagePullSecrets: []
serviceAccountName: ""
replicaCount: 1
args: []
config: {}
extraEnv: []
extraVolumes: []
extraVolumeMounts: []
secrets:
  existingSecret: ""
  keys: {}
  files: {}
podLabels: {}
podAnnotations: {}
terminationGracePeriodSeconds: 45
podSecurityContext:
  runAsNonRoot: true
  runAsUser: 10001
  runAsGroup: 10001
  fsGroup: 10001
  seccompProfile:
    type: RuntimeDefault
securityContext:
  runAsNonRoot: true
  runAsUser: 10001
  runAsGroup: 10001
  readOnlyRootFilesystem: true
  allowPrivilegeEscalation: false
  privileged: false
  capabilities:
    drop: [ALL]
tmpSizeLimit: 256Mi
probes:
  liveness: {path: /healthz, periodSeconds: 10, timeoutSeconds: 3, failureThreshold: 3}
  readiness: {path: /readyz, periodSeconds: 5, timeoutSeconds: 3, failureThreshold: 3}
  startup: {enabled: false, path: /healthz, periodSeconds: 5, timeoutSeconds: 3, failureThreshold: 24}
service:
  type: ClusterIP
podDisruptionBudget:
  enabled: true
  maxUnavailable: 1
topologySpread:
  enabled: true
  maxSkew: 1
  whenUnsatisfiable: ScheduleAnyway
  topologyKeys: [topology.kubernetes.io/zone, kubernetes.io/hostname]
podMonitor:
  enabled: false
  interval: 30s
  scrapeTimeout: 10s
  labels: {}
autoscaling:
  enabled: false
  minReplicas: 1
  maxReplicas: 3
  lagThreshold: "1000"
  pollingInterval: 30
  cooldownPeriod: 300
  bootstrapServers: ""
  authenticationRef: ""
nodeSelector: {}
tolerations: []
affinity: {}
{{- end -}}

{{/* Call first in a chart's template: fills in what its values leave out. */}}
{{- define "fluxgate.applyDefaults" -}}
{{- $_ := merge .Values (fromYaml (include "fluxgate.defaults" .)) -}}
{{- end -}}
