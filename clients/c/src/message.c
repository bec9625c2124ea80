/* Messages and their acks, background tasks, posts and scene requests. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

lifecycle_message *lifecycle_message_ref(lifecycle_message *m) {
        if (m) m->refs++;
        return m;
}

lifecycle_message *lifecycle_message_unref(lifecycle_message *m) {
        if (!m || --m->refs > 0) return NULL;
        free(m->type);
        free(m->launched_by);
        free(m->scene);
        free(m->role);
        free(m->configuration);
        free(m->options);
        free(m->saved_state);
        for (size_t i = 0; m->scenes && m->scenes[i]; i++) free(m->scenes[i]);
        free(m->scenes);
        free(m->answer_configuration);
        free(m->answer_state);
        free(m);
        return NULL;
}

lifecycle *lifecycle_message_get_lifecycle(lifecycle_message *m) { return m ? m->owner : NULL; }
const char *lifecycle_message_get_type(lifecycle_message *m) { return m ? m->type : NULL; }
uint64_t lifecycle_message_get_id(lifecycle_message *m) { return m ? m->id : 0; }
uint64_t lifecycle_message_get_deadline_ms(lifecycle_message *m) { return m ? m->deadline_ms : 0; }
const char *lifecycle_message_get_launched_by(lifecycle_message *m) { return m ? m->launched_by : NULL; }
int lifecycle_message_is_background_launch(lifecycle_message *m) { return m && m->background; }
int lifecycle_message_was_terminated_in_background(lifecycle_message *m) { return m && m->terminated_in_background; }
const char *lifecycle_message_get_scene(lifecycle_message *m) { return m ? m->scene : NULL; }
const char *lifecycle_message_get_role(lifecycle_message *m) { return m ? m->role : NULL; }
const char *lifecycle_message_get_configuration(lifecycle_message *m) { return m ? m->configuration : NULL; }
const char *lifecycle_message_get_options(lifecycle_message *m) { return m ? m->options : NULL; }
const char *lifecycle_message_get_saved_state(lifecycle_message *m) { return m ? m->saved_state : NULL; }
const char *const *lifecycle_message_get_scenes(lifecycle_message *m) { return m ? (const char *const *)m->scenes : NULL; }

static int replace(char **slot, const char *value) {
        char *copy = value ? strdup(value) : NULL;
        if (value && !copy) return -ENOMEM;
        free(*slot);
        *slot = copy;
        return 0;
}

int lifecycle_message_set_configuration(lifecycle_message *m, const char *configuration) {
        if (!m || m->acked) return -EINVAL;
        return replace(&m->answer_configuration, configuration);
}

int lifecycle_message_set_fetch_result(lifecycle_message *m, lifecycle_fetch_result result) {
        if (!m || m->acked || result < LIFECYCLE_FETCH_NO_DATA || result > LIFECYCLE_FETCH_FAILED) return -EINVAL;
        m->answer_fetch = result;
        return 0;
}

int lifecycle_message_set_state(lifecycle_message *m, const char *json) {
        if (!m || m->acked) return -EINVAL;
        if (json && !lc_json_valid(json, strlen(json))) return -EINVAL;
        return replace(&m->answer_state, json);
}

int lifecycle_message_ack(lifecycle_message *m) {
        if (!m) return -EINVAL;
        if (m->acked) return -EALREADY;
        m->acked = true;
        lifecycle *l = m->owner;
        lc_apply_after_ack(l, m->type);
        /* Standalone messages need no ack; one from an earlier connection must not reach this one. */
        if (m->id == 0 || l->standalone) return 0;
        if (m->generation != l->generation || l->sock < 0) return -ENOTCONN;
        lc_buffer line = { 0 };
        char head[64];
        snprintf(head, sizeof head, "{\"type\":\"ack\",\"id\":%" PRIu64, m->id);
        int r = lc_buffer_append_string(&line, head);
        if (r == 0 && m->answer_configuration) {
                r = lc_buffer_append_string(&line, ",\"configuration\":");
                if (r == 0) r = lc_buffer_append_json_string(&line, m->answer_configuration);
        }
        if (r == 0 && m->answer_state) {
                r = lc_buffer_append_string(&line, ",\"state\":");
                if (r == 0) r = lc_buffer_append_string(&line, m->answer_state);
        }
        /* performFetch is always answered: noData unless the handler said otherwise. */
        if (r == 0 && strcmp(m->type, "performFetch") == 0) {
                static const char *const results[] = { "noData", "newData", "failed" };
                r = lc_buffer_append_string(&line, ",\"result\":");
                if (r == 0) r = lc_buffer_append_json_string(&line, results[m->answer_fetch]);
        }
        if (r == 0) r = lc_buffer_append_string(&line, "}");
        if (r == 0) r = lc_send_line(l, &line);
        lc_buffer_free(&line);
        return r;
}

int lifecycle_begin_background_task(lifecycle *l, const char *name, lifecycle_expiration_handler expiration,
                                    void *userdata, uint64_t *ret_task) {
        if (!l || !ret_task) return -EINVAL;
        lc_task *tasks = realloc(l->tasks, (l->task_count + 1) * sizeof *tasks);
        if (!tasks) return -ENOMEM;
        l->tasks = tasks;
        uint64_t id = l->next_task++;
        char head[64];
        snprintf(head, sizeof head, "{\"type\":\"beginBackgroundTask\",\"task\":%" PRIu64 ",\"name\":", id);
        lc_buffer line = { 0 };
        int r = lc_buffer_append_string(&line, head);
        if (r == 0) r = lc_buffer_append_json_string(&line, name ? name : "");
        if (r == 0) r = lc_buffer_append_string(&line, "}");
        /* Not connected (standalone, or between daemons) is no failure: there is nobody to suspend the app. */
        if (r == 0 && l->sock >= 0) r = lc_send_line(l, &line);
        lc_buffer_free(&line);
        if (r < 0) return r;
        l->tasks[l->task_count++] = (lc_task){ .id = id, .expiration = expiration, .userdata = userdata };
        *ret_task = id;
        return 0;
}

int lifecycle_end_background_task(lifecycle *l, uint64_t task) {
        if (!l) return -EINVAL;
        size_t i = 0;
        while (i < l->task_count && l->tasks[i].id != task) i++;
        if (i == l->task_count) return -ENOENT;
        l->tasks[i] = l->tasks[--l->task_count];
        if (l->sock < 0) return 0;
        char text[80];
        snprintf(text, sizeof text, "{\"type\":\"endBackgroundTask\",\"task\":%" PRIu64 "}", task);
        lc_buffer line = { 0 };
        int r = lc_buffer_append_string(&line, text);
        if (r == 0) r = lc_send_line(l, &line);
        lc_buffer_free(&line);
        return r;
}

uint64_t lifecycle_get_background_time_remaining(lifecycle *l) { return l ? l->remaining_ms : UINT64_MAX; }

static int member(lc_buffer *b, const char *key, const char *value, bool raw) {
        if (!value) return 0;
        int r = lc_buffer_append_string(b, ",\"");
        if (r == 0) r = lc_buffer_append_string(b, key);
        if (r == 0) r = lc_buffer_append_string(b, "\":");
        if (r == 0) r = raw ? lc_buffer_append_string(b, value) : lc_buffer_append_json_string(b, value);
        return r;
}

static int send_request(lifecycle *l, const char *type, const char *const fields[][2], const bool *raw, size_t count) {
        if (!l) return -EINVAL;
        if (l->standalone) return 0;
        if (!l->started) return -ENOTCONN;
        for (size_t i = 0; i < count; i++)
                if (raw[i] && fields[i][1] && !lc_json_valid(fields[i][1], strlen(fields[i][1]))) return -EINVAL;
        lc_buffer line = { 0 };
        int r = lc_buffer_append_string(&line, "{\"type\":");
        if (r == 0) r = lc_buffer_append_json_string(&line, type);
        for (size_t i = 0; r == 0 && i < count; i++) r = member(&line, fields[i][0], fields[i][1], raw[i]);
        if (r == 0) r = lc_buffer_append_string(&line, "}");
        if (r == 0) r = lc_send_line(l, &line);
        lc_buffer_free(&line);
        return r;
}

int lifecycle_post(lifecycle *l, const char *name, const char *payload, const char *app) {
        if (!name || !*name) return -EINVAL;
        const char *const fields[][2] = { { "name", name }, { "payload", payload }, { "app", app } };
        const bool raw[] = { false, true, false };
        return send_request(l, "post", fields, raw, 3);
}

int lifecycle_request_scene_activation(lifecycle *l, const char *scene, const char *role,
                                       const char *configuration, const char *options) {
        const char *const fields[][2] = { { "scene", scene }, { "role", role }, { "configuration", configuration }, { "options", options } };
        const bool raw[] = { false, false, false, true };
        return send_request(l, "requestSceneActivation", fields, raw, 4);
}

int lifecycle_request_scene_destruction(lifecycle *l, const char *scene) {
        if (!scene || !*scene) return -EINVAL;
        const char *const fields[][2] = { { "scene", scene } };
        const bool raw[] = { false };
        return send_request(l, "requestSceneDestruction", fields, raw, 1);
}
