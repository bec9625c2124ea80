# bash completion for lifectl(1): verbs, options, app names, notification types and scene sessions.
# Installed as $(PREFIX)/share/bash-completion/completions/lifectl (bash-completion loads it on first use);
# or source it from ~/.bashrc. Needs nothing but bash: no bash-completion helpers, no jq, no python.
#
# App names come from `lifectl list` (the first column after the header), notification types for `post` from
# `lifectl status --json` (daemon.notificationTypes, entries "name: coalescing"), the sessions of an app for
# `scene focus|background|close|discard APP` from `lifectl scenes APP` (the second column after the header), all
# asked of the daemon the command line names (--runtime-dir) with a short timeout; when it cannot be reached
# nothing is offered.

# The lifectl being completed, with its --runtime-dir if one was given, then the arguments.
_lifectl_query() {
    NO_COLOR=1 "${_lifectl_command[@]}" --timeout 2 "$@" 2>/dev/null
}

_lifectl_apps() {
    local header=1 name rest
    while read -r name rest; do
        if ((header)); then header=0; continue; fi
        [[ -n $name ]] && printf '%s\n' "$name"
    done < <(_lifectl_query list)
}

# The scene sessions of app $1 (none when it does not use scenes: then the first line is not the header).
_lifectl_scenes() {
    local header=1 app scene rest
    while read -r app scene rest; do
        if ((header)); then
            [[ $app == APP && $scene == SCENE ]] || return
            header=0
            continue
        fi
        [[ -n $scene ]] && printf '%s\n' "$scene"
    done < <(_lifectl_query scenes "$1")
}

_lifectl_notification_types() {
    local json entries entry
    json=$(_lifectl_query status --json) || return
    [[ $json =~ \"notificationTypes\"[[:space:]]*:[[:space:]]*\[([^]]*)\] ]] || return
    IFS=, read -ra entries <<< "${BASH_REMATCH[1]}"
    for entry in "${entries[@]}"; do
        entry=${entry#*\"}
        entry=${entry%%:*}
        [[ -n $entry ]] && printf '%s\n' "$entry"
    done
}

_lifectl() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local verbs="list status launch focus deactivate background suspend resume terminate post simulate-memory-pressure reload scene scenes watch logs"
    local options="--json -q --quiet --no-pager --runtime-dir --timeout -h --help"
    local -a _lifectl_command=("${COMP_WORDS[0]}")
    command -v -- "${COMP_WORDS[0]}" >/dev/null 2>&1 || _lifectl_command=(lifectl)
    COMPREPLY=()

    # The verb, the words that follow it, and the daemon to ask.
    local i word verb="" arguments=0
    local -a words=()
    for ((i = 1; i < COMP_CWORD; i++)); do
        word=${COMP_WORDS[i]}
        case $word in
            --runtime-dir) _lifectl_command+=(--runtime-dir "${COMP_WORDS[i+1]}"); ((i++)) ;;
            --timeout|--app|--data|--role|--config) ((i++)) ;;
            -*) ;;
            *) if [[ -z $verb ]]; then verb=$word; else words+=("$word"); ((arguments++)); fi ;;
        esac
    done

    case $prev in
        --runtime-dir) mapfile -t COMPREPLY < <(compgen -d -- "$cur"); return ;;
        --timeout|--data|--config) return ;;
        --app) mapfile -t COMPREPLY < <(compgen -W "$(_lifectl_apps)" -- "$cur"); return ;;
        --role) mapfile -t COMPREPLY < <(compgen -W "window externalDisplay" -- "$cur"); return ;;
    esac

    if [[ $cur == -* ]]; then
        case $verb in
            launch) options+=" --background" ;;
            post) options+=" --app --data" ;;
            logs) options+=" -f --follow" ;;
            scene) [[ ${words[0]:-open} == open ]] && options+=" --role --config" ;;
        esac
        mapfile -t COMPREPLY < <(compgen -W "$options" -- "$cur")
        return
    fi
    if [[ -z $verb ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$verbs" -- "$cur")
        return
    fi
    # scene SUBVERB APP [SCENE]: the subverbs, then the apps, then that app's sessions (not for open).
    if [[ $verb == scene ]]; then
        case $arguments in
            0) mapfile -t COMPREPLY < <(compgen -W "open focus background close discard" -- "$cur") ;;
            1) mapfile -t COMPREPLY < <(compgen -W "$(_lifectl_apps)" -- "$cur") ;;
            2) [[ ${words[0]} == open ]] || mapfile -t COMPREPLY < <(compgen -W "$(_lifectl_scenes "${words[1]}")" -- "$cur") ;;
        esac
        return
    fi
    ((arguments == 0)) || return
    case $verb in
        resume)
            mapfile -t COMPREPLY < <(compgen -W "--all $(_lifectl_apps)" -- "$cur") ;;
        status|launch|focus|deactivate|background|suspend|terminate|logs|scenes|watch)
            mapfile -t COMPREPLY < <(compgen -W "$(_lifectl_apps)" -- "$cur") ;;
        post)
            mapfile -t COMPREPLY < <(compgen -W "$(_lifectl_notification_types)" -- "$cur") ;;
    esac
}

complete -F _lifectl lifectl
