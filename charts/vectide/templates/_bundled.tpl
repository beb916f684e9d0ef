{{/*
A bundled single-replica service to try Vectide out (no persistence, no replication):
dict "root" $ "component" "kafka" "values" .Values.kafka "env" list "args" list
     "ports" list (name/port; the first one is probed) "data" mount path of its emptyDir
*/}}
{{- define "vectide.bundled" -}}
{{- $root := .root -}}
{{- $first := first .ports -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "vectide.fullname" $root }}-{{ .component }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "vectide.labels" . | nindent 4 }}
spec:
  replicas: 1
  strategy:
    type: Recreate
  selector:
    matchLabels:
      {{- include "vectide.selectorLabels" . | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "vectide.labels" . | nindent 8 }}
    spec:
      automountServiceAccountToken: false
      # the images' own non-root user
      securityContext:
        runAsNonRoot: true
        runAsUser: 1000
        runAsGroup: 1000
        fsGroup: 1000
        seccompProfile:
          type: RuntimeDefault
      containers:
        - name: {{ .component }}
          image: {{ .values.image.repository }}:{{ .values.image.tag }}
          imagePullPolicy: {{ .values.image.pullPolicy }}
          {{- with .args }}
          args:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          ports:
            {{- range .ports }}
            - name: {{ .name }}
              containerPort: {{ .port }}
              protocol: TCP
            {{- end }}
          {{- with .env }}
          env:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          readinessProbe:
            tcpSocket:
              port: {{ $first.name }}
            initialDelaySeconds: 5
            periodSeconds: 5
          livenessProbe:
            tcpSocket:
              port: {{ $first.name }}
            initialDelaySeconds: 30
            periodSeconds: 15
            failureThreshold: 6
          {{- with .values.resources }}
          resources:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          securityContext:
            {{- toYaml $root.Values.securityContext | nindent 12 }}
          volumeMounts:
            - name: data
              mountPath: {{ .data }}
            - name: tmp
              mountPath: /tmp
      {{- include "vectide.scheduling" .values | trim | nindent 6 }}
      volumes:
        - name: data
          emptyDir: {}
        - name: tmp
          emptyDir: {}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ include "vectide.fullname" $root }}-{{ .component }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "vectide.labels" . | nindent 4 }}
spec:
  type: ClusterIP
  selector:
    {{- include "vectide.selectorLabels" . | nindent 4 }}
  ports:
    {{- range .ports }}
    - name: {{ .name }}
      port: {{ .port }}
      targetPort: {{ .name }}
      protocol: TCP
    {{- end }}
{{- end -}}
