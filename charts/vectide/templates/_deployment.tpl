{{/*
One role's Deployment. dict:
  root: $   component: "proxy"   values: .Values.proxy   replicas: N
  args: list of `vectide` arguments   ports: list of (dict "name" "grpc" "port" 19530)
  spark: true for the data node (Spark conf, SPARK_LOCAL_IP, its run-dir volume)
*/}}
{{- define "vectide.roleDeployment" -}}
{{- $root := .root -}}
{{- $values := .values -}}
{{- $metricsPort := int $root.Values.service.metricsPort -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "vectide.fullname" $root }}-{{ .component }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "vectide.labels" . | nindent 4 }}
spec:
  replicas: {{ .replicas }}
  {{- if .spark }}
  strategy:
    type: Recreate
  {{- end }}
  selector:
    matchLabels:
      {{- include "vectide.selectorLabels" . | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "vectide.labels" . | nindent 8 }}
      annotations:
        checksum/config: {{ include "vectide.config" $root | sha256sum }}
        {{- with $root.Values.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      {{- with $root.Values.image.pullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- if and .spark (hasPrefix "k8s://" $values.spark.master) }}
      serviceAccountName: {{ include "vectide.sparkServiceAccount" $root }}
      {{- else }}
      automountServiceAccountToken: false
      {{- end }}
      securityContext:
        {{- toYaml $root.Values.podSecurityContext | nindent 8 }}
      containers:
        - name: {{ .component }}
          image: {{ include "vectide.image" $root }}
          imagePullPolicy: {{ $root.Values.image.all.pullPolicy }}
          args:
            {{- toYaml .args | nindent 12 }}
            - --metrics-port
            - {{ $metricsPort | quote }}
          ports:
            {{- range .ports }}
            - name: {{ .name }}
              containerPort: {{ .port }}
              protocol: TCP
            {{- end }}
            - name: metrics
              containerPort: {{ $metricsPort }}
              protocol: TCP
          env:
            {{- include "vectide.env" $root | nindent 12 }}
            {{- if .spark }}
            {{- include "vectide.sparkEnv" $root | nindent 12 }}
            {{- end }}
            {{- with $values.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          {{- include "vectide.probes" (dict "root" $root "port" "metrics") | trim | nindent 10 }}
          {{- with $values.resources }}
          resources:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          securityContext:
            {{- toYaml $root.Values.securityContext | nindent 12 }}
          volumeMounts:
            {{- include "vectide.volumeMounts" $root | nindent 12 }}
            {{- if .spark }}
            - name: spark-conf
              mountPath: /etc/vectide-spark
              readOnly: true
            {{- end }}
      {{- include "vectide.scheduling" $values | trim | nindent 6 }}
      volumes:
        {{- include "vectide.volumes" $root | nindent 8 }}
        {{- if and .spark $values.persistence.enabled }}
        - name: run
          persistentVolumeClaim:
            claimName: {{ include "vectide.fullname" $root }}-datanode
        {{- else }}
        - name: run
          emptyDir: {}
        {{- end }}
        {{- if .spark }}
        - name: spark-conf
          configMap:
            name: {{ include "vectide.fullname" $root }}-spark
        {{- end }}
{{- end -}}

{{/* The data node's Spark environment: its conf dir, and the pod IP executors call back. */}}
{{- define "vectide.sparkEnv" -}}
- name: SPARK_CONF_DIR
  value: /etc/vectide-spark
- name: SPARK_LOCAL_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
{{- end -}}

{{- define "vectide.sparkServiceAccount" -}}
{{- default (printf "%s-spark" (include "vectide.fullname" .)) .Values.dataNode.spark.kubernetes.serviceAccount.name -}}
{{- end -}}

{{/* A role's Service: dict "root" $ "component" "proxy" "ports" list "type" "ClusterIP" */}}
{{- define "vectide.roleService" -}}
{{- $root := .root -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "vectide.fullname" $root }}-{{ .component }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "vectide.labels" . | nindent 4 }}
spec:
  type: ClusterIP
  {{- if .headless }}
  clusterIP: None
  {{- end }}
  selector:
    {{- include "vectide.selectorLabels" . | nindent 4 }}
  ports:
    {{- range .ports }}
    - name: {{ .name }}
      port: {{ .port }}
      targetPort: {{ .name }}
      protocol: TCP
    {{- end }}
    - name: metrics
      port: {{ $root.Values.service.metricsPort }}
      targetPort: metrics
      protocol: TCP
{{- end -}}
