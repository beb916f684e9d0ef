{{/* Names and labels, as milvus-helm lays them out. */}}
{{- define "vectide.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "vectide.fullname" -}}
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

{{- define "vectide.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Selector labels of one component, with milvus-helm's bare `component` label too:
   dict "root" $ "component" "proxy" */}}
{{- define "vectide.selectorLabels" -}}
app.kubernetes.io/name: {{ include "vectide.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
component: {{ .component | quote }}
{{- end -}}

{{- define "vectide.labels" -}}
{{ include "vectide.selectorLabels" . }}
helm.sh/chart: {{ include "vectide.chart" .root }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
{{- with .root.Values.labels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "vectide.image" -}}
{{- $img := .Values.image.all -}}
{{- printf "%s:%s" $img.repository (default .Chart.AppVersion ($img.tag | toString)) -}}
{{- end -}}

{{- define "vectide.clusterName" -}}
{{- default .Release.Name .Values.clusterName | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{/* Endpoints: the external service when enabled, else the bundled one. */}}
{{- define "vectide.kafkaBrokers" -}}
{{- if .Values.externalKafka.enabled -}}
{{- required "externalKafka.brokerList is required with externalKafka.enabled" .Values.externalKafka.brokerList -}}
{{- else -}}
{{- printf "%s-kafka:9092" (include "vectide.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "vectide.zookeeperHosts" -}}
{{- if .Values.externalZookeeper.enabled -}}
{{- if not .Values.externalZookeeper.endpoints -}}
{{- fail "externalZookeeper.endpoints is required with externalZookeeper.enabled" -}}
{{- end -}}
{{- join "," .Values.externalZookeeper.endpoints -}}
{{- else -}}
{{- printf "%s-zookeeper:2181" (include "vectide.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "vectide.s3Endpoint" -}}
{{- if .Values.externalS3.enabled -}}
{{- $s3 := .Values.externalS3 -}}
{{- printf "%s://%s:%v" (ternary "https" "http" $s3.useSSL) (required "externalS3.host is required with externalS3.enabled" $s3.host) $s3.port -}}
{{- else -}}
{{- printf "http://%s-minio:9000" (include "vectide.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/*
The Vectide configuration (services/common/config.py) the chart renders, with
extraConfigFiles."user.yaml" merged over it. Credentials are not here: they come from the
Secret as VECTIDE_* environment variables.
*/}}
{{- define "vectide.config" -}}
{{- $v := .Values -}}
{{- $s3 := ternary $v.externalS3 $v.minio $v.externalS3.enabled -}}
{{- $kafka := dict "bootstrap_servers" (include "vectide.kafkaBrokers" .) "managed" false "fetch_wait_max_ms" 100 -}}
{{- if $v.externalKafka.enabled -}}
{{- with $v.externalKafka.securityProtocol }}{{ $_ := set $kafka "security_protocol" . }}{{ end -}}
{{- with $v.externalKafka.sasl.mechanisms }}{{ $_ := set $kafka "sasl_mechanism" . }}{{ end -}}
{{- with $v.externalKafka.ssl.caLocation }}{{ $_ := set $kafka "ssl_ca_location" . }}{{ end -}}
{{- end -}}
{{- $zookeeper := dict "hosts" (include "vectide.zookeeperHosts" .) "root" $v.externalZookeeper.rootPath "managed" false -}}
{{- if include "vectide.zookeeperSasl" . -}}
{{- $_ := set $zookeeper "sasl_username" $v.externalZookeeper.sasl.username -}}
{{- $_ := set $zookeeper "sasl_acl" $v.externalZookeeper.sasl.acl -}}
{{- end -}}
{{- $config := dict
  "cluster" (dict "name" (include "vectide.clusterName" .))
  "kafka" $kafka
  "zookeeper" $zookeeper
  "s3" (dict "endpoint" (include "vectide.s3Endpoint" .) "bucket" (required "a bucket name is required" $s3.bucketName) "root_path" $s3.rootPath "region" $s3.region "managed" false)
  "data" (dict "spark_master" $v.dataNode.spark.master)
  "service" (dict "proxy_port" (int $v.service.port) "http_port" (int $v.service.httpPort) "metrics_port" (int $v.service.metricsPort) "bind_host" "0.0.0.0")
  "infra" (dict "run_dir" "/var/lib/vectide")
-}}
{{- if $v.tls.enabled -}}
{{- $_ := set $config "security" (include "vectide.tlsConfig" . | fromYaml) -}}
{{- end -}}
{{- $user := fromYaml (index $v.extraConfigFiles "user.yaml" | default "") -}}
{{- if hasKey $user "Error" -}}
{{- fail (printf "extraConfigFiles.user.yaml is not valid YAML: %s" (get $user "Error")) -}}
{{- end -}}
{{- toYaml (mergeOverwrite $config $user) -}}
{{- end -}}

{{/* The security section's TLS keys: the files of the mounted Secret (tls.enabled). */}}
{{- define "vectide.tlsConfig" -}}
{{- $t := .Values.tls -}}
{{- if not (has (int $t.mode) (list 1 2)) -}}
{{- fail "tls.mode must be 1 (one-way) or 2 (mutual)" -}}
{{- end -}}
tls_mode: {{ int $t.mode }}
tls_cert_file: /etc/vectide-tls/tls.crt
tls_key_file: /etc/vectide-tls/tls.key
tls_ca_file: /etc/vectide-tls/ca.crt
internal_tls: {{ $t.internal }}
tls_server_name: {{ (ternary (required "tls.serverName is required with tls.internal" $t.serverName) $t.serverName $t.internal) | quote }}
{{- end -}}

{{/* "true" when Vectide logs in to an external ZooKeeper with SASL; its password must
come from somewhere. */}}
{{- define "vectide.zookeeperSasl" -}}
{{- $z := .Values.externalZookeeper -}}
{{- if and $z.enabled $z.sasl.username -}}
{{- if not (or $z.sasl.password $z.sasl.existingSecret) -}}
{{- fail "externalZookeeper.sasl.password or externalZookeeper.sasl.existingSecret is required with externalZookeeper.sasl.username" -}}
{{- end -}}
true
{{- end -}}
{{- end -}}

{{/* Environment of every Vectide container. */}}
{{- define "vectide.env" -}}
- name: VECTIDE_CONFIG
  value: /etc/vectide/vectide.yaml
- name: VECTIDE_SERVICE_HOST
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
- name: VECTIDE_LOG_LEVEL
  value: {{ .Values.log.level | quote }}
- name: VECTIDE_S3_ACCESS_KEY
  valueFrom:
    secretKeyRef:
      name: {{ include "vectide.fullname" . }}-secret
      key: s3-access-key
- name: VECTIDE_S3_SECRET_KEY
  valueFrom:
    secretKeyRef:
      name: {{ include "vectide.fullname" . }}-secret
      key: s3-secret-key
{{- if include "vectide.zookeeperSasl" . }}
- name: VECTIDE_ZOOKEEPER_SASL_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ .Values.externalZookeeper.sasl.existingSecret | default (printf "%s-secret" (include "vectide.fullname" .)) }}
      key: zookeeper-sasl-password
{{- end }}
{{- if and .Values.externalKafka.enabled .Values.externalKafka.sasl.username }}
- name: VECTIDE_KAFKA_SASL_USERNAME
  valueFrom:
    secretKeyRef:
      name: {{ include "vectide.fullname" . }}-secret
      key: kafka-sasl-username
- name: VECTIDE_KAFKA_SASL_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "vectide.fullname" . }}-secret
      key: kafka-sasl-password
{{- end }}
{{- end -}}

{{/* Liveness and readiness: httpGet /healthz on the metrics port. dict "root" $ "port" N */}}
{{- define "vectide.probes" -}}
{{- $root := .root -}}
{{- range $kind := list "livenessProbe" "readinessProbe" }}
{{- $p := index $root.Values $kind }}
{{- if $p.enabled }}
{{ $kind }}:
  httpGet:
    path: /healthz
    port: {{ $.port }}
  initialDelaySeconds: {{ $p.initialDelaySeconds }}
  periodSeconds: {{ $p.periodSeconds }}
  timeoutSeconds: {{ $p.timeoutSeconds }}
  successThreshold: {{ $p.successThreshold }}
  failureThreshold: {{ $p.failureThreshold }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Volumes every Vectide pod mounts: its config, a run dir, /tmp, the Spark conf. */}}
{{- define "vectide.volumeMounts" -}}
- name: config
  mountPath: /etc/vectide
  readOnly: true
- name: run
  mountPath: /var/lib/vectide
- name: tmp
  mountPath: /tmp
{{- if .Values.tls.enabled }}
- name: tls
  mountPath: /etc/vectide-tls
  readOnly: true
{{- end }}
{{- end -}}

{{- define "vectide.volumes" -}}
- name: config
  configMap:
    name: {{ include "vectide.fullname" . }}-config
- name: tmp
  emptyDir: {}
{{- if .Values.tls.enabled }}
- name: tls
  secret:
    secretName: {{ required "tls.secretName is required when tls.enabled" .Values.tls.secretName }}
    defaultMode: 0440
{{- end }}
{{- end -}}

{{/* Scheduling and resources of a role: its values block. */}}
{{- define "vectide.scheduling" -}}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* A query node's environment: its server labels as VECTIDE_SERVER_LABEL_<KEY>, then extraEnv. */}}
{{- define "vectide.serverLabelEnv" -}}
{{- $env := list }}
{{- range $key, $value := .labels }}
{{- $env = append $env (dict "name" (printf "VECTIDE_SERVER_LABEL_%s" $key) "value" (toString $value)) }}
{{- end }}
{{- toYaml (concat $env (.extraEnv | default list)) }}
{{- end -}}
