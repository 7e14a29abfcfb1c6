{{/* Names and labels. */}}
{{- define "gpuledger.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gpuledger.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "gpuledger.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "gpuledger.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* A component's object name: <fullname>-<component>. */}}
{{- define "gpuledger.component" -}}
{{- printf "%s-%s" (include "gpuledger.fullname" .root) .component | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gpuledger.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpuledger.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "gpuledger.labels" -}}
{{ include "gpuledger.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/part-of: gpuledger
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "gpuledger.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "gpuledger.secretName" -}}
{{- default (include "gpuledger.fullname" .) .Values.secrets.existingSecret -}}
{{- end -}}

{{- define "gpuledger.serviceAccountName" -}}
{{- include "gpuledger.component" (dict "root" . "component" "collector") -}}
{{- end -}}

{{/* The claim holding the FOCUS exports: one's own (existingClaim) or the chart's. */}}
{{- define "gpuledger.exportsClaim" -}}
{{- default (include "gpuledger.component" (dict "root" . "component" "exports")) .Values.dagster.exports.persistence.existingClaim -}}
{{- end -}}

{{/* A URL's TCP port: its own, else the client's default for the scheme (.https, .http). */}}
{{- define "gpuledger.urlPort" -}}
{{- $host := (urlParse .url).host -}}
{{- if regexMatch ":[0-9]+$" $host -}}
{{- regexFind "[0-9]+$" $host -}}
{{- else if hasPrefix "https:" .url -}}
{{- .https -}}
{{- else -}}
{{- .http -}}
{{- end -}}
{{- end -}}

{{/* The TCP ports the release's pods connect to outside the release, space-separated: every
Kafka bootstrap server's (9092 when it names none), ClickHouse's (8443 for https, 8123 for http
when the URL names none), Prometheus' (443 or 80 when none), an existing
PostgreSQL's and the API server's (for the collectors). Brokers that advertise other ports than
their bootstrap addresses need networkPolicy.egress rules of their own. */}}
{{- define "gpuledger.egressPorts" -}}
{{- $ports := list -}}
{{- range $server := splitList "," .Values.kafka.bootstrapServers -}}
{{- $server = trim $server -}}
{{- if regexMatch ":[0-9]+$" $server -}}
{{- $ports = append $ports (regexFind "[0-9]+$" $server) -}}
{{- else -}}
{{- $ports = append $ports "9092" -}}
{{- end -}}
{{- end -}}
{{- /* sql/client.py: ClickHouse's own ports when the URL names none */ -}}
{{- $ports = append $ports (include "gpuledger.urlPort" (dict "url" .Values.clickhouse.url "https" "8443" "http" "8123")) -}}
{{- with .Values.prometheus.url -}}
{{- $ports = append $ports (include "gpuledger.urlPort" (dict "url" . "https" "443" "http" "80")) -}}
{{- end -}}
{{- if and .Values.dagster.enabled (not .Values.dagster.postgresql.bundled) -}}
{{- $ports = append $ports (toString .Values.dagster.postgresql.port) -}}
{{- end -}}
{{- if or .Values.collectors.kubernetes.enabled .Values.collectors.podResources.enabled -}}
{{- range .Values.networkPolicy.apiServerPorts -}}
{{- $ports = append $ports (toString .) -}}
{{- end -}}
{{- end -}}
{{- join " " $ports -}}
{{- end -}}

{{- define "gpuledger.postgresHost" -}}
{{- if .Values.dagster.postgresql.bundled -}}
{{- include "gpuledger.component" (dict "root" . "component" "postgresql") -}}
{{- else -}}
{{- required "dagster.postgresql.host is required when dagster.postgresql.bundled is false" .Values.dagster.postgresql.host -}}
{{- end -}}
{{- end -}}

{{/* One secret variable, from the release's Secret (optional: a key it lacks stays unset). */}}
{{- define "gpuledger.secretEnv" -}}
- name: {{ .name }}
  valueFrom:
    secretKeyRef:
      name: {{ include "gpuledger.secretName" .root }}
      key: {{ .key }}
      optional: true
{{- end -}}

{{/* The environment of every gpuledger process: settings from the ConfigMap, secrets from the Secret. */}}
{{- define "gpuledger.env" -}}
envFrom:
  - configMapRef:
      name: {{ include "gpuledger.fullname" . }}
env:
  {{- include "gpuledger.secretEnv" (dict "root" . "name" "KAFKA_SASL_PASSWORD" "key" .Values.secrets.keys.kafkaSaslPassword) | nindent 2 }}
  {{- include "gpuledger.secretEnv" (dict "root" . "name" "CLICKHOUSE_PASSWORD" "key" .Values.secrets.keys.clickhousePassword) | nindent 2 }}
  {{- include "gpuledger.secretEnv" (dict "root" . "name" "CLICKHOUSE_READER_PASSWORD" "key" .Values.secrets.keys.clickhouseReaderPassword) | nindent 2 }}
{{- end -}}

{{/* Writable places on a read-only root filesystem: /tmp and GPULEDGER_HOME. */}}
{{- define "gpuledger.scratchMounts" -}}
- name: tmp
  mountPath: /tmp
- name: home
  mountPath: /var/lib/gpuledger
{{- if .Values.kafka.caSecret.name }}
- name: kafka-ca
  mountPath: /etc/gpuledger/kafka
  readOnly: true
{{- end }}
{{- end -}}

{{- define "gpuledger.scratchVolumes" -}}
- name: tmp
  emptyDir: {}
{{- if not .homeClaim }}
- name: home
  emptyDir: {}
{{- end }}
{{- if .root.Values.kafka.caSecret.name }}
- name: kafka-ca
  secret:
    secretName: {{ .root.Values.kafka.caSecret.name }}
    items:
      - key: {{ .root.Values.kafka.caSecret.key }}
        path: ca.crt
{{- end }}
{{- end -}}

{{- define "gpuledger.podSpecCommon" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- end -}}

{{- define "gpuledger.podMeta" -}}
labels:
  {{- include "gpuledger.labels" . | nindent 2 }}
  {{- if .metrics }}
  gpuledger.io/metrics: "true"  # serves GPULEDGER_METRICS_PORT (the metrics Service selects it)
  {{- end }}
  {{- with .root.Values.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
annotations:
  checksum/config: {{ include (print .root.Template.BasePath "/configmap.yaml") .root | sha256sum }}
  {{- with .root.Values.podAnnotations }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end -}}

{{/* The metrics port of a worker or collector, and its probes (the process serves /metrics). */}}
{{- define "gpuledger.metricsContainer" -}}
ports:
  - name: metrics
    containerPort: {{ .Values.metricsPort }}
    protocol: TCP
livenessProbe:
  httpGet:
    path: /metrics
    port: metrics
  initialDelaySeconds: 20
  periodSeconds: 30
  timeoutSeconds: 5
  failureThreshold: 4
readinessProbe:
  httpGet:
    path: /metrics
    port: metrics
  periodSeconds: 15
  timeoutSeconds: 5
{{- end -}}

{{/* The settings of every gpuledger process, as environment variables (no secret here). */}}
{{- define "gpuledger.settings" -}}
GPULEDGER_CLUSTER: {{ .Values.cluster | quote }}
GPULEDGER_HOME: /var/lib/gpuledger
KAFKA_BOOTSTRAP_SERVERS: {{ required "kafka.bootstrapServers is required (an external Kafka)" .Values.kafka.bootstrapServers | quote }}
KAFKA_SECURITY_PROTOCOL: {{ .Values.kafka.securityProtocol | quote }}
{{- with .Values.kafka.saslMechanism }}
KAFKA_SASL_MECHANISM: {{ . | quote }}
{{- end }}
{{- with .Values.kafka.saslUsername }}
KAFKA_SASL_USERNAME: {{ . | quote }}
{{- end }}
{{- if .Values.kafka.caSecret.name }}
KAFKA_SSL_CAFILE: /etc/gpuledger/kafka/ca.crt
{{- end }}
GPULEDGER_TOPIC_PREFIX: {{ .Values.kafka.topicPrefix | quote }}
CLICKHOUSE_URL: {{ required "clickhouse.url is required (an external ClickHouse)" .Values.clickhouse.url | quote }}
CLICKHOUSE_USER: {{ .Values.clickhouse.user | quote }}
CLICKHOUSE_DATABASE: {{ .Values.clickhouse.database | quote }}
{{- with .Values.clickhouse.cluster }}
CLICKHOUSE_CLUSTER: {{ . | quote }}
{{- end }}
CLICKHOUSE_READER_USER: {{ .Values.clickhouse.readerUser | quote }}
{{- with .Values.prometheus.url }}
PROMETHEUS_URL: {{ . | quote }}
{{- end }}
GPULEDGER_WINDOW_SECONDS: {{ .Values.attribution.windowSeconds | quote }}
GPULEDGER_ALLOWED_LATENESS_SECONDS: {{ .Values.attribution.allowedLatenessSeconds | quote }}
GPULEDGER_FUTURE_TOLERANCE_SECONDS: {{ .Values.attribution.futureToleranceSeconds | quote }}
GPULEDGER_TEAM_LABEL_KEYS: {{ join "," .Values.ownerLabels.team | quote }}
GPULEDGER_MODEL_LABEL_KEYS: {{ join "," .Values.ownerLabels.model | quote }}
GPULEDGER_METRICS_PORT: {{ .Values.metricsPort | quote }}
GPULEDGER_METRICS_HOST: "0.0.0.0"
{{- end -}}

{{/* The Dagster instance (dagster.yaml) and the code location (workspace.yaml). */}}
{{- define "gpuledger.dagsterInstance" -}}
dagster.yaml: |
  storage:
    postgres:
      postgres_db:
        hostname: {{ include "gpuledger.postgresHost" . }}
        port: {{ .Values.dagster.postgresql.port }}
        username: {{ .Values.dagster.postgresql.username }}
        password:
          env: DAGSTER_PG_PASSWORD
        db_name: {{ .Values.dagster.postgresql.database }}
  run_coordinator:
    module: dagster.core.run_coordinator
    class: QueuedRunCoordinator
    config:
      max_concurrent_runs: 2
  telemetry:
    enabled: false
workspace.yaml: |
  load_from:
    - python_module:
        module_name: dagster_project.definitions
        location_name: gpuledger
{{- end -}}
