{{/* Checks of values that the schema cannot express (relations between values, the policy text). Each
     refusal names the value and the fix; `helm install` and `helm template` stop on the first. */}}
{{- define "warmpod.validate" -}}
{{- include "warmpod.validateAccounts" . }}
{{- if and .Values.gitlab.runnerImage.repository (not .Values.gitlab.runnerImage.tag) }}
{{- fail "gitlab.runnerImage.tag: set it with gitlab.runnerImage.repository (the tag of the image you built from Dockerfile.gitlab-runner)" }}
{{- end }}
{{- include "warmpod.validatePools" . }}
{{- include "warmpod.validateOneRelease" . }}
{{- end -}}

{{/* A ServiceAccount the chart does not create must be named: the pods and RoleBindings name it, and
     an empty name would bind the namespace's "default" account or nothing at all. */}}
{{- define "warmpod.validateAccounts" -}}
{{- $v := .Values }}
{{- range $key, $sa := dict "serviceAccount" (list true $v.serviceAccount) "gitlab.serviceAccount" (list $v.gitlab.enabled $v.gitlab.serviceAccount) "github.serviceAccount" (list $v.github.enabled $v.github.serviceAccount) "controller.serviceAccount" (list $v.controller.enabled $v.controller.serviceAccount) }}
{{- $on := index $sa 0 }}{{ $a := index $sa 1 }}
{{- if and $on (not $a.create) (not $a.name) }}
{{- fail (printf "%s.name: set it when %s.create is false (the existing ServiceAccount to run as; its Role binding needs the name)" $key $key) }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "warmpod.validatePools" -}}
{{- $names := dict }}
{{- $controller := printf "%s-pools" (include "warmpod.fullname" .) }}
{{- $defaults := list }}
{{- range $i, $p := .Values.pools }}
{{- $where := printf "pools[%d] (%s)" $i $p.name }}
{{- if hasKey $names $p.name }}
{{- fail (printf "%s: name %q is also pools[%s]'s: each pool is a Deployment of that name; rename one" $where $p.name (get $names $p.name)) }}
{{- end }}
{{- $_ := set $names $p.name (toString $i) }}
{{- if and $.Values.controller.enabled (eq $p.name $controller) }}
{{- fail (printf "%s: name %q is the pool controller's Deployment; rename the pool" $where $p.name) }}
{{- end }}
{{- if $p.default }}{{ $defaults = append $defaults (printf "pools[%d] (%s)" $i $p.name) }}{{ end }}
{{- $main := ternary "job" "build" (eq (default "gitlab" $p.for) "github") }}
{{- /* The pod's other containers' names (pools.yaml): a service may not take one. */}}
{{- $taken := ternary (list "install-warmpod" "externals") (list "install-warmpod" "install-gitlab-runner-helper" "install-warmpod-and-gitlab-runner-helper") (eq (default "gitlab" $p.for) "github") }}
{{- $svcs := dict }}
{{- range $j, $s := $p.services }}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$" (toString $s.name)) }}
{{- fail (printf "%s: services[%d].name %q is not a container name (lower-case letters, digits and -, at most 63)" $where $j $s.name) }}
{{- end }}
{{- if has $s.name $taken }}
{{- fail (printf "%s: services[%d].name %q is the name of one of the pool pod's init containers (%s); name the service after what it runs" $where $j $s.name (join ", " $taken)) }}
{{- end }}
{{- if eq $s.name $main }}
{{- fail (printf "%s: services[%d].name %q is the name of the pool's job container (%q for %s pools); name the service after what it runs (postgres, redis)" $where $j $s.name $main (default "gitlab" $p.for)) }}
{{- end }}
{{- if hasKey $svcs $s.name }}
{{- fail (printf "%s: services[%d].name %q is also services[%s]'s; container names of a pod differ" $where $j $s.name (get $svcs $s.name)) }}
{{- end }}
{{- $_ := set $svcs $s.name (toString $j) }}
{{- end }}
{{- if $p.policy }}{{ include "warmpod.validatePolicy" (dict "where" $where "policy" $p.policy) }}{{ end }}
{{- end }}
{{- if gt (len $defaults) 1 }}
{{- fail (printf "pools: %s are each default: true; one pool at most makes the cold pods of images that have no pool" (join ", " $defaults)) }}
{{- end }}
{{- end -}}

{{/* The policy text as the pool controller reads it (sizing.Parse, decision 0005): what Helm can check
     of it, the keys and the shape of counts, durations and cron fields. The rest (a timezone's name, a
     cron expression that never matches, min above max) `warmpod-pools check` checks. */}}
{{- define "warmpod.validatePolicy" -}}
{{- $fix := "check a policy in full with: warmpod-pools check FILE (docs/reference/cli.md)" }}
{{- $periods := fromYamlArray .policy }}
{{- if and (not $periods) (not (hasPrefix "[" (trim .policy))) }}
{{- fail (printf "%s: policy: want a list of periods (- idle_count: 1 …), or [] for the default; %s" .where $fix) }}
{{- end }}
{{- $known := list "periods" "timezone" "idle_count" "idle_time" "min" "max" "scale_factor" "scale_factor_limit" "max_growth_rate" }}
{{- range $i, $per := $periods }}
{{- $at := printf "%s: policy period %d" $.where $i }}
{{- if kindIs "string" $per }}
{{- /* fromYamlArray gives a list of one error string for text that is not a YAML list. */}}
{{- fail (printf "%s: policy: not a YAML list of periods (%s); %s" $.where $per $fix) }}
{{- end }}
{{- if not (kindIs "map" $per) }}
{{- fail (printf "%s: %v is not a period (a map of %s); %s" $at $per (join ", " $known) $fix) }}
{{- end }}
{{- range $k, $v := $per }}
{{- if not (has $k $known) }}
{{- fail (printf "%s: unknown key %q (a period has %s); %s" $at $k (join ", " $known) $fix) }}
{{- end }}
{{- $number := or (kindIs "float64" $v) (kindIs "int64" $v) (kindIs "int" $v) }}
{{- if and (has $k (list "idle_count" "min" "max" "scale_factor_limit" "max_growth_rate")) (not (and $number (ge (float64 $v) 0.0) (le (float64 $v) 100000.0) (eq (float64 $v) (float64 (int64 $v))))) }}
{{- fail (printf "%s: %s: %s is not a count (a whole number, 0..100000, unquoted); %s" $at $k (toJson $v) $fix) }}
{{- end }}
{{- if and (eq $k "scale_factor") (not (and $number (ge (float64 $v) 0.0) (le (float64 $v) 1000.0))) }}
{{- fail (printf "%s: scale_factor: %s is not a number 0..1000 (idle pods per busy pod, e.g. 0.5); %s" $at (toJson $v) $fix) }}
{{- end }}
{{- if and (eq $k "idle_time") (not (and (kindIs "string" $v) (regexMatch "^(([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$|^0$" $v))) }}
{{- fail (printf "%s: idle_time: %v is not a Go duration, e.g. 30m or 1800s; %s" $at $v $fix) }}
{{- end }}
{{- if and (eq $k "timezone") (not (kindIs "string" $v)) }}
{{- fail (printf "%s: timezone: %v is not a zone name like Europe/Berlin or UTC; %s" $at $v $fix) }}
{{- end }}
{{- if eq $k "periods" }}
{{- if not (kindIs "slice" $v) }}
{{- fail (printf "%s: periods: %v is not a list of cron expressions, e.g. [\"* 8-17 * * mon-fri\"]; %s" $at $v $fix) }}
{{- end }}
{{- range $j, $expr := $v }}
{{- include "warmpod.validateCron" (dict "at" (printf "%s: periods[%d]" $at $j) "expr" $expr "fix" $fix) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* One cron expression of a period: GitLab's five fields (minute hour day-of-month month
     day-of-week), or docker-machine's seven with * as second and year (sizing/cron.go). Each field is
     a list of *, values, ranges a-b, each with an optional step /n. */}}
{{- define "warmpod.validateCron" -}}
{{- if not (kindIs "string" .expr) }}
{{- fail (printf "%s: %v is not a cron expression in quotes, e.g. \"* 8-17 * * mon-fri\"; %s" .at .expr .fix) }}
{{- end }}
{{- $fields := splitList " " (regexReplaceAll "\\s+" (trim .expr) " ") }}
{{- if and (eq (len $fields) 7) (eq (first $fields) "*") (eq (last $fields) "*") }}
{{- $fields = slice $fields 1 6 }}
{{- end }}
{{- if ne (len $fields) 5 }}
{{- fail (printf "%s: %q has %d fields; a period has 5: minute hour day-of-month month day-of-week, e.g. \"* 8-17 * * mon-fri\"; %s" .at .expr (len $fields) .fix) }}
{{- end }}
{{- $spec := list
  (list "minute" "[0-5]?[0-9]" "0..59" "")
  (list "hour" "[01]?[0-9]|2[0-3]" "0..23" "")
  (list "day of month" "0?[1-9]|[12][0-9]|3[01]" "1..31" "|\\?")
  (list "month" "0?[1-9]|1[0-2]|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec" "jan or 1 (jan..dec, or 1..12)" "")
  (list "day of week" "[0-7]|mon|tue|wed|thu|fri|sat|sun" "mon or 1 (mon..sun, or 0..7 where 0 and 7 are Sunday)" "|\\?") }}
{{- range $i, $f := $fields }}
{{- $s := index $spec $i }}
{{- $v := printf "(%s)" (index $s 1) }}
{{- $item := printf "(\\*%s|%s(-%s)?)(/[1-9][0-9]*)?" (index $s 3) $v $v }}
{{- if not (regexMatch (printf "^(?i)%s(,%s)*$" $item $item) $f) }}
{{- fail (printf "%s: %q: %s %q: want %s; %s" $.at $.expr (index $s 0) $f (index $s 2) $.fix) }}
{{- end }}
{{- end }}
{{- end -}}

{{/* One release per namespace: the drivers and the pool controller read every pool of their namespace
     (the Deployments labelled app.kubernetes.io/name=warmpod), so a second release there would share
     pools and budget with the first. `lookup` sees the cluster at install and upgrade (empty in
     `helm template`, which has none). */}}
{{- define "warmpod.validateOneRelease" -}}
{{- $deps := lookup "apps/v1" "Deployment" .Release.Namespace "" }}
{{- /* A release with no pool and no controller has only its accounts to show. */}}
{{- $sas := lookup "v1" "ServiceAccount" .Release.Namespace "" }}
{{- range $kind, $found := dict "Deployment" $deps "ServiceAccount" $sas }}
{{- range $d := (default (list) (get (default dict $found) "items")) }}
{{- $l := default dict $d.metadata.labels }}
{{- if and (eq (get $l "app.kubernetes.io/name") "warmpod") (ne (get $l "app.kubernetes.io/instance") $.Release.Name) }}
{{- $other := get $l "app.kubernetes.io/instance" }}
{{- if $other }}
{{- fail (printf "namespace %s already has warmpod release %q (its %s %s): the drivers and the pool controller read every pool of their namespace, so two releases here would share them; add these pools to release %q, or install into another namespace" $.Release.Namespace $other $kind $d.metadata.name $other) }}
{{- else }}
{{- fail (printf "namespace %s already has warmpod objects not installed by this chart (%s %s, e.g. from deploy/): the drivers and the pool controller read every pool of their namespace; delete them, or install into another namespace" $.Release.Namespace $kind $d.metadata.name) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}
