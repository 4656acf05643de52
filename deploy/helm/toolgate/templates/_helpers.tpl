{{/*
Names and labels, as `helm create` makes them.
*/}}
{{- define "toolgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The fullname is "<release>-toolgate", or the release name when it already
contains the chart name. Kubernetes names are at most 63 characters, and
the longest suffix added below is "-approvals" (10), so it is cut at 53.
*/}}
{{- define "toolgate.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 53 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 53 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 53 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "toolgate.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "toolgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "toolgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "toolgate.labels" -}}
helm.sh/chart: {{ include "toolgate.chart" . }}
{{ include "toolgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: toolgate
{{- end }}

{{- define "toolgate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "toolgate.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "toolgate.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The Secret the environment comes from: the user's or the chart's. */}}
{{- define "toolgate.secretName" -}}
{{- default (include "toolgate.fullname" .) .Values.secret.existingSecret }}
{{- end }}

{{- define "toolgate.policyConfigMap" -}}
{{- default (printf "%s-policy" (include "toolgate.fullname" .)) .Values.policy.existingConfigMap }}
{{- end }}

{{- define "toolgate.rulesConfigMap" -}}
{{- default (printf "%s-rules" (include "toolgate.fullname" .)) .Values.policy.existingRulesConfigMap }}
{{- end }}

{{/* Whether a rules table is configured (rules in values, or a ConfigMap). */}}
{{- define "toolgate.hasRules" -}}
{{- if or .Values.policy.rules .Values.policy.existingRulesConfigMap }}true{{ end }}
{{- end }}

{{/*
The checks that span several values, which values.schema.json cannot
express. Every template includes this, so any render fails the same way.
*/}}
{{- define "toolgate.validate" -}}
{{- $preStop := 0 }}
{{- if and .Values.preStopSleepSeconds (semverCompare ">=1.30-0" .Capabilities.KubeVersion.Version) }}
{{- $preStop = int .Values.preStopSleepSeconds }}
{{- end }}
{{- $grace := include "toolgate.seconds" (.Values.config.shutdown_grace | default "20s") | float64 }}
{{- if le (float64 .Values.terminationGracePeriodSeconds) (addf $preStop $grace) }}
{{- fail (printf "terminationGracePeriodSeconds (%d) must be longer than the preStop sleep (%d s) plus config.shutdown_grace (%s): Kubernetes would kill toolgate while calls in flight still finish. Raise terminationGracePeriodSeconds or lower shutdown_grace" (int .Values.terminationGracePeriodSeconds) $preStop (.Values.config.shutdown_grace | default "20s")) }}
{{- end }}
{{- if and (gt (int .Values.replicaCount) 1) (eq .Values.pending.store "memory") }}
{{- fail (printf "replicaCount is %d but pending.store is \"memory\": each pod would keep its own parked calls, and an approval given on one pod would never reach a call parked on another. Set pending.store: redis and redis.url (or TOOLGATE_PENDING_REDIS_URL in secret.existingSecret), or replicaCount: 1" (int .Values.replicaCount)) }}
{{- end }}
{{- if hasKey .Values.secret.values "TOOLGATE_PENDING_REDIS_URL" }}
{{- fail "secret.values.TOOLGATE_PENDING_REDIS_URL: set redis.url instead (the chart puts it in the Secret)" }}
{{- end }}
{{- if and (eq .Values.pending.store "redis") (not .Values.redis.url) (not .Values.secret.existingSecret) }}
{{- fail "pending.store is \"redis\" but redis.url is empty: set redis.url, or put TOOLGATE_PENDING_REDIS_URL in secret.existingSecret" }}
{{- end }}
{{- if and .Values.redis.url .Values.secret.existingSecret }}
{{- fail "redis.url is set together with secret.existingSecret: the chart makes no Secret then, so put the URL in that Secret as TOOLGATE_PENDING_REDIS_URL and leave redis.url empty" }}
{{- end }}
{{- $agentKeys := dict }}
{{- range $i, $k := .Values.config.identity.api_keys }}
{{- $_ := set $agentKeys $k.secretKey (printf "config.identity.api_keys[%d].secretKey" $i) }}
{{- end }}
{{- $others := list (list "the approvals secret" "TOOLGATE_APPROVALS_SECRET") (list "the Redis URL" "TOOLGATE_PENDING_REDIS_URL") }}
{{- range $i, $a := .Values.config.approvals.approvers }}{{ with $a.secretKey }}{{ $others = append $others (list (printf "config.approvals.approvers[%d].secretKey" $i) .) }}{{ end }}{{ end }}
{{- with .Values.config.approvals.identity }}
{{- with .secretKey }}{{ $others = append $others (list "config.approvals.identity.secretKey" .) }}{{ end }}
{{- with .clientSecretKey }}{{ $others = append $others (list "config.approvals.identity.clientSecretKey" .) }}{{ end }}
{{- with .cookieSecretKey }}{{ $others = append $others (list "config.approvals.identity.cookieSecretKey" .) }}{{ end }}
{{- end }}
{{- with .Values.config.approvals.slack }}{{ with .signingSecretKey }}{{ $others = append $others (list "config.approvals.slack.signingSecretKey" .) }}{{ end }}{{ end }}
{{- range $i, $n := .Values.config.approvals.notify }}
{{- with $n.secretKey }}{{ $others = append $others (list (printf "config.approvals.notify[%d].secretKey" $i) .) }}{{ end }}
{{- with $n.urlSecretKey }}{{ $others = append $others (list (printf "config.approvals.notify[%d].urlSecretKey" $i) .) }}{{ end }}
{{- end }}
{{- range $o := $others }}
{{- if hasKey $agentKeys (index $o 1) }}
{{- fail (printf "%s and %s both name the Secret key %s: an agent would hold %s with its own key. Give each its own Secret key" (get $agentKeys (index $o 1)) (index $o 0) (index $o 1) (index $o 0)) }}
{{- end }}
{{- end }}
{{- range $i, $n := .Values.config.approvals.notify }}
{{- if and $n.urlSecretKey (not $.Values.secret.existingSecret) (not (hasKey $.Values.secret.values $n.urlSecretKey)) }}
{{- fail (printf "config.approvals.notify[%d].urlSecretKey is %s, but secret.values.%s is not given: set it to the webhook URL (the chart would generate a random value), or put it in secret.existingSecret" $i $n.urlSecretKey $n.urlSecretKey) }}
{{- end }}
{{- end }}
{{- if and .Values.redis.url (ne .Values.pending.store "redis") }}
{{- fail "redis.url is set but pending.store is \"memory\": set pending.store: redis, or drop redis.url" }}
{{- end }}
{{- if and .Values.secret.existingSecret .Values.secret.values }}
{{- fail "secret.values is set together with secret.existingSecret: the chart makes no Secret then; put the values in that Secret" }}
{{- end }}
{{- if and .Values.policy.files .Values.policy.existingConfigMap }}
{{- fail "policy.files is set together with policy.existingConfigMap: use one of them" }}
{{- end }}
{{- if and .Values.policy.rules .Values.policy.existingRulesConfigMap }}
{{- fail "policy.rules is set together with policy.existingRulesConfigMap: use one of them" }}
{{- end }}
{{- if and .Values.podDisruptionBudget.enabled (not (kindIs "invalid" .Values.podDisruptionBudget.minAvailable)) (not (kindIs "invalid" .Values.podDisruptionBudget.maxUnavailable)) }}
{{- fail "podDisruptionBudget: set minAvailable or maxUnavailable, not both (null the other)" }}
{{- end }}
{{- if and .Values.podDisruptionBudget.enabled (kindIs "invalid" .Values.podDisruptionBudget.minAvailable) (kindIs "invalid" .Values.podDisruptionBudget.maxUnavailable) }}
{{- fail "podDisruptionBudget: set minAvailable or maxUnavailable" }}
{{- end }}
{{- range $k, $_ := .Values.policy.files }}
{{- if not (or (hasSuffix ".rego" $k) (hasSuffix ".json" $k) (hasSuffix ".yaml" $k) (hasSuffix ".yml" $k)) }}
{{- fail (printf "policy.files.%s: toolgate reads only .rego, .json, .yaml and .yml files from the policy directory" $k) }}
{{- end }}
{{- if hasSuffix "_test.rego" $k }}
{{- fail (printf "policy.files.%s: _test.rego files are Rego unit tests, which toolgate does not load; run them with toolgate policy test instead" $k) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The Secret keys toolgate reads, one a line: the approvals secret, the Redis
URL with the redis store, and every secretKey (and the clientSecretKey,
cookieSecretKey and signingSecretKey of approvals.identity and
approvals.slack, and the urlSecretKey of approvals.notify) under config.
*/}}
{{- define "toolgate.secretKeys" -}}
TOOLGATE_APPROVALS_SECRET
{{ if eq .Values.pending.store "redis" }}TOOLGATE_PENDING_REDIS_URL
{{ end }}
{{- range .Values.config.identity.api_keys }}{{ .secretKey }}
{{ end }}
{{- range .Values.config.approvals.approvers }}{{ with .secretKey }}{{ . }}
{{ end }}{{ end }}
{{- with .Values.config.approvals.identity }}
{{- with .secretKey }}{{ . }}
{{ end }}
{{- with .clientSecretKey }}{{ . }}
{{ end }}
{{- with .cookieSecretKey }}{{ . }}
{{ end }}
{{- end }}
{{- with .Values.config.approvals.slack }}{{ .signingSecretKey }}
{{ end }}
{{- range .Values.config.approvals.notify }}{{ with .secretKey }}{{ . }}
{{ end }}{{ with .urlSecretKey }}{{ . }}
{{ end }}{{ end }}
{{- end }}

{{/* The sorted, de-duplicated list of those keys. */}}
{{- define "toolgate.secretKeyList" -}}
{{- include "toolgate.secretKeys" . | trim | splitList "\n" | uniq | sortAlpha | toJson }}
{{- end }}

{{/*
public_url: as configured; else the first Ingress host; else the approvals
Service's cluster DNS name.
*/}}
{{- define "toolgate.publicURL" -}}
{{- if .Values.config.public_url }}
{{- .Values.config.public_url }}
{{- else if and .Values.ingress.enabled .Values.ingress.hosts }}
{{- $host := (first .Values.ingress.hosts).host }}
{{- $tls := false }}
{{- range .Values.ingress.tls }}{{ if has $host .hosts }}{{ $tls = true }}{{ end }}{{ end }}
{{- printf "%s://%s" (ternary "https" "http" $tls) $host }}
{{- else }}
{{- printf "http://%s-approvals.%s.svc:%d" (include "toolgate.fullname" .) .Release.Namespace (int .Values.approvalsService.port) }}
{{- end }}
{{- end }}

{{/*
toolgate.yaml, built as a dict and written with toYaml, so no value from
values.yaml can break the YAML around it. Secrets appear only as ${NAME}
references to the environment.
*/}}
{{- define "toolgate.config" -}}
{{- $c := .Values.config }}
{{- $cfg := dict }}
{{- $_ := set $cfg "listen" (dict
      "proxy" (printf ":%d" (int .Values.ports.proxy))
      "approvals" (printf ":%d" (int .Values.ports.approvals))
      "admin" (printf ":%d" (int .Values.ports.admin))) }}
{{- $_ := set $cfg "public_url" (include "toolgate.publicURL" .) }}
{{- with $c.proxy_public_url }}{{ $_ := set $cfg "proxy_public_url" . }}{{ end }}
{{- $_ := set $cfg "upstreams" $c.upstreams }}
{{- $keys := list }}
{{- range $c.identity.api_keys }}
{{- $keys = append $keys (set (omit . "secretKey") "key" (printf "${%s}" .secretKey)) }}
{{- end }}
{{- $id := dict "api_keys" $keys "anonymous" $c.identity.anonymous }}
{{- with $c.identity.jwt }}{{ $_ := set $id "jwt" . }}{{ end }}
{{- with $c.identity.browser_origins }}{{ $_ := set $id "browser_origins" . }}{{ end }}
{{- $_ := set $cfg "identity" $id }}
{{- $policy := dict "dir" "/etc/toolgate/policy" "watch" true "mode" $c.policy.mode "default" $c.policy.default }}
{{- if include "toolgate.hasRules" . }}{{ $_ := set $policy "rules_file" "/etc/toolgate/rules/rules.yaml" }}{{ end }}
{{- with $c.policy.capabilities }}{{ $_ := set $policy "capabilities" . }}{{ end }}
{{- with $c.policy.subject_modes }}{{ $_ := set $policy "subject_modes" . }}{{ end }}
{{- with $c.policy.mode_header }}{{ $_ := set $policy "mode_header" . }}{{ end }}
{{- $_ := set $cfg "policy" $policy }}
{{- $pending := merge (dict "store" .Values.pending.store) $c.pending }}
{{- if eq .Values.pending.store "redis" }}
{{- $_ := set $pending "redis_url" "${TOOLGATE_PENDING_REDIS_URL}" }}
{{- $_ := set $pending "redis_prefix" (default (printf "toolgate:%s:%s:" .Release.Namespace .Release.Name) .Values.redis.prefix) }}
{{- end }}
{{- $_ := set $cfg "pending" $pending }}
{{- $approvers := list }}
{{- range $c.approvals.approvers }}
{{- $a := dict "name" .name }}
{{- with .secretKey }}{{ $_ := set $a "key" (printf "${%s}" .) }}{{ end }}
{{- with .groups }}{{ $_ := set $a "groups" . }}{{ end }}
{{- $approvers = append $approvers $a }}
{{- end }}
{{- $notify := list }}
{{- range $i, $n0 := $c.approvals.notify }}
{{- if and $n0.url (has ($n0.format | default "cloudevents") (list "slack" "teams")) }}
{{- fail (printf "config.approvals.notify[%d]: a Slack or Teams webhook URL is a credential, and the ConfigMap is readable by any role that may view the namespace: put the URL in the Secret and name its key in urlSecretKey (instead of url)" $i) }}
{{- end }}
{{- $n := omit $n0 "secretKey" "urlSecretKey" }}
{{- with $n0.secretKey }}{{ $_ := set $n "secret" (printf "${%s}" .) }}{{ end }}
{{- with $n0.urlSecretKey }}{{ $_ := set $n "url" (printf "${%s}" .) }}{{ end }}
{{- $notify = append $notify $n }}
{{- end }}
{{- $approvals := dict "secret" "${TOOLGATE_APPROVALS_SECRET}" "approvers" $approvers "notify" $notify }}
{{- with $c.approvals.identity }}
{{- $i := omit . "secretKey" "clientSecretKey" "cookieSecretKey" }}
{{- with .secretKey }}{{ $_ := set $i "secret" (printf "${%s}" .) }}{{ end }}
{{- with .clientSecretKey }}{{ $_ := set $i "client_secret" (printf "${%s}" .) }}{{ end }}
{{- with .cookieSecretKey }}{{ $_ := set $i "cookie_secret" (printf "${%s}" .) }}{{ end }}
{{- $_ := set $approvals "identity" $i }}
{{- end }}
{{- with $c.approvals.slack }}
{{- $sl := dict "signing_secret" (printf "${%s}" .signingSecretKey) }}
{{- with .users }}{{ $_ := set $sl "users" . }}{{ end }}
{{- $_ := set $approvals "slack" $sl }}
{{- end }}
{{- with $c.approvals.requester_sign_in }}{{ $_ := set $approvals "requester_sign_in" . }}{{ end }}
{{- $_ := set $cfg "approvals" $approvals }}
{{- $_ := set $cfg "limits" $c.limits }}
{{- $_ := set $cfg "log" $c.log }}
{{- $_ := set $cfg "shutdown_grace" $c.shutdown_grace }}
{{- toYaml $cfg }}
{{- end }}

{{/*
toolgate.seconds: a Go duration ("20s", "1m30s", "1.5h") in seconds, as
a float; values.schema.json has checked its shape.
*/}}
{{- define "toolgate.seconds" -}}
{{- $total := 0.0 }}
{{- $units := dict "ns" 0.000000001 "us" 0.000001 "µs" 0.000001 "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0 }}
{{- range regexFindAll "[0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h)" . -1 }}
{{- $n := regexFind "^[0-9]+(\\.[0-9]+)?" . | float64 }}
{{- $total = addf $total (mulf $n (get $units (regexReplaceAll "^[0-9]+(\\.[0-9]+)?" . ""))) }}
{{- end }}
{{- $total }}
{{- end }}
