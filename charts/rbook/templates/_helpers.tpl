{{/* The chart's name, truncated to the 63 characters a DNS label allows. */}}
{{- define "rbook.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's object name: fullnameOverride, else RELEASE-rbook (RELEASE when it already says rbook). */}}
{{- define "rbook.fullname" -}}
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

{{- define "rbook.selectorLabels" -}}
app.kubernetes.io/name: {{ include "rbook.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "rbook.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "rbook.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: control-plane
{{- end -}}

{{- define "rbook.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "rbook.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "rbook.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding the approval secret: the operator's, else the chart's quickstart one. */}}
{{- define "rbook.approvalSecretName" -}}
{{- default (printf "%s-approval" (include "rbook.fullname" .)) .Values.approvalSecret.existingSecret -}}
{{- end -}}

{{- define "rbook.authSecretName" -}}
{{- default (printf "%s-auth" (include "rbook.fullname" .)) .Values.auth.existingSecret -}}
{{- end -}}

{{- define "rbook.databaseSecretName" -}}
{{- default (printf "%s-database" (include "rbook.fullname" .)) .Values.database.postgresql.existingSecret -}}
{{- end -}}

{{- define "rbook.hasAuth" -}}
{{- if or .Values.auth.existingSecret .Values.auth.tokens -}}true{{- end -}}
{{- end -}}

{{- define "rbook.pvcName" -}}
{{- default (printf "%s-data" (include "rbook.fullname" .)) .Values.database.sqlite.persistence.existingClaim -}}
{{- end -}}

{{/*
rbook.validate fails the rendering with a message that says what to set, for the combinations
rbook serve would refuse at start-up (or, for SQLite, corrupt silently): several replicas on
one SQLite file, no approval secret, no authentication on a non-loopback address.
*/}}
{{- define "rbook.validate" -}}
{{- $v := .Values -}}
{{- if and (eq $v.database.type "sqlite") (gt (int $v.replicaCount) 1) -}}
{{- fail (printf "replicaCount is %d but database.type is sqlite: a SQLite database has exactly one server (rbook serve locks the file), so several replicas need PostgreSQL. Set replicaCount=1, or database.type=postgresql with database.postgresql.existingSecret (docs/helm.md, \"Two modes\")." (int $v.replicaCount)) -}}
{{- end -}}
{{- if and (eq $v.database.type "postgresql") (not (or $v.database.postgresql.existingSecret $v.database.postgresql.url)) -}}
{{- fail "database.type is postgresql but no database URL: set database.postgresql.existingSecret (a Secret with the postgres:// URL under database.postgresql.existingSecretKey), or database.postgresql.url for a quickstart." -}}
{{- end -}}
{{- if not (or $v.approvalSecret.existingSecret $v.approvalSecret.value) -}}
{{- fail "rbook serve does not start without an approval secret: set approvalSecret.existingSecret (a Secret with at least 16 random bytes under approvalSecret.secretKey), or approvalSecret.value for a quickstart." -}}
{{- end -}}
{{- if and $v.approvalSecret.value (lt (len $v.approvalSecret.value) 16) -}}
{{- fail "approvalSecret.value is shorter than 16 bytes: rbook serve refuses it. Use e.g. $(head -c 32 /dev/urandom | base64)." -}}
{{- end -}}
{{- if not (or (include "rbook.hasAuth" .) (index $v.serve "oidc-config") (index $v.serve "sign-in-config") (index $v.serve "insecure")) -}}
{{- fail "rbook serve listens on every interface in a pod, and refuses that without authentication: set auth.existingSecret (an auth file, lines \"identity role token\") or auth.tokens for a quickstart, or serve.oidc-config, or serve.insecure=true to serve unauthenticated." -}}
{{- end -}}
{{- if and $v.tls.enabled (not $v.tls.secretName) -}}
{{- fail "tls.enabled needs tls.secretName: a kubernetes.io/tls Secret (tls.crt, tls.key) such as cert-manager writes." -}}
{{- end -}}
{{- if and (not $v.tls.enabled) (or $v.serviceMonitor.tlsConfig.caSecret.name $v.serviceMonitor.tlsConfig.serverName) -}}
{{- fail "serviceMonitor.tlsConfig is how Prometheus verifies rbook's certificate, and rbook serves plain HTTP without tls.enabled: set tls.enabled and tls.secretName, or remove serviceMonitor.tlsConfig." -}}
{{- end -}}
{{- if and $v.githubApp.enabled (not (and $v.githubApp.existingSecret (gt (int64 $v.githubApp.appId) 0))) -}}
{{- fail "githubApp.enabled needs githubApp.appId (the App's numeric id) and githubApp.existingSecret (a Secret with the private key and the webhook secret)." -}}
{{- end -}}
{{- end -}}

{{/*
rbook.config is the `rbook serve --config` file: keys are serve's long flag names. The chart
owns the keys that name paths inside the pod; serve and extraConfig add the rest. The
PostgreSQL URL is never here: it reaches the server as RBOOK_DB from its Secret.
*/}}
{{- define "rbook.config" -}}
{{- $v := .Values -}}
{{- $c := dict "addr" (printf ":%d" (int $v.service.port)) -}}
{{- if eq $v.database.type "sqlite" -}}
{{- $_ := set $c "db" "/var/lib/rbook/controlplane.db" -}}
{{- end -}}
{{- if include "rbook.hasAuth" . -}}
{{- $_ := set $c "auth-file" (printf "/etc/rbook-secrets/auth/%s" $v.auth.key) -}}
{{- end -}}
{{- if $v.tls.enabled -}}
{{- $_ := set $c "tls-cert" "/etc/rbook-tls/tls.crt" -}}
{{- $_ := set $c "tls-key" "/etc/rbook-tls/tls.key" -}}
{{- if $v.tls.clientCA -}}
{{- $_ := set $c "tls-client-ca" "/etc/rbook-tls/ca.crt" -}}
{{- end -}}
{{- end -}}
{{- if $v.githubApp.enabled -}}
{{- $_ := set $c "github-app-id" (int64 $v.githubApp.appId) -}}
{{- $_ := set $c "github-app-key" (printf "/etc/rbook-secrets/github/%s" $v.githubApp.privateKeyKey) -}}
{{- $_ := set $c "github-webhook-secret-file" (printf "/etc/rbook-secrets/github/%s" $v.githubApp.webhookSecretKey) -}}
{{- if $v.githubApp.apiUrl -}}
{{- $_ := set $c "github-api-url" $v.githubApp.apiUrl -}}
{{- end -}}
{{- end -}}
{{- if $v.serviceMonitor.bearerTokenSecret.name -}}
{{- $_ := set $c "metrics-token-file" (printf "/etc/rbook-secrets/metrics/%s" $v.serviceMonitor.bearerTokenSecret.key) -}}
{{- end -}}
{{- $c = merge $c (deepCopy $v.serve) -}}
{{- $c = mergeOverwrite $c (deepCopy $v.extraConfig) -}}
{{- toYaml $c -}}
{{- end -}}
