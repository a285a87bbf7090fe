"""Slack and generic webhooks against a local HTTP receiver: payloads, escaping, retries, timeouts."""

from __future__ import annotations

import base64
import json
from urllib.parse import quote

import pytest

from perfgate.notify._http import USER_AGENT, post_json
from perfgate.notify._message import MAX_ROWS, events_of, summarize_check
from perfgate.notify.base import NotifyError, RetryPolicy
from perfgate.notify.dispatch import notify_check
from perfgate.notify.settings import NotifyConfig
from perfgate.notify.slack import SlackNotifier, escape
from perfgate.notify.webhook import SCHEMA, WebhookNotifier
from tests.notify.conftest import HOSTILE, SECRET_TOKEN, make_result
from tests.safety.recorder import recording_resolver

FAST = RetryPolicy(attempts=3, timeout=5.0, backoff=0.5)


class Sleeps(list):
    """A fake ``time.sleep`` that records the back-off delays instead of waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def _summary(**kwargs):
    result = make_result(**kwargs)
    return summarize_check(result, events_of(result), url="https://ci.example/run/1")


def test_slack_payload_content(receiver):
    SlackNotifier(receiver.url, "PERFGATE_SLACK_WEBHOOK", FAST).send(_summary())
    (request,) = receiver.requests
    assert request["headers"]["Content-Type"] == "application/json; charset=utf-8"
    assert request["headers"]["User-Agent"] == USER_AGENT
    assert request["path"].endswith(SECRET_TOKEN)
    body = json.loads(request["body"])
    assert body["text"] == "perfgate: performance regression in dqn (6 failing) at def4567890ab"
    section = body["blocks"][0]["text"]
    assert section["type"] == "mrkdwn"
    text = section["text"]
    assert "• regressed: `training_step_time_ms` +30.0% (10.00 → 13.00 ms)" in text
    assert "<https://ci.example/run/1|Full report>" in text
    assert body["unfurl_links"] is False


def test_slack_escapes_hostile_metric_names(receiver):
    SlackNotifier(receiver.url, "PERFGATE_SLACK_WEBHOOK", FAST).send(_summary())
    text = receiver.bodies[0]["blocks"][0]["text"]["text"]
    # no control sequence survives: mentions, links and HTML are entities; names sit in code spans
    assert "<!channel>" not in text and "<script>" not in text and "<http://evil" not in text
    assert "`&lt;!channel&gt; training_step_time_ms`" in text
    assert "`&lt;script&gt;alert('x')&lt;/script&gt;_ms`" in text
    assert "`&lt;http://evil.example|click here&gt;`" in text
    assert "`*bold* _it_ 'code' [click](http://evil.example)`" in text  # the backtick cannot close the span
    assert "`line break &amp; ampersand`" in text  # a new line cannot start a fake bullet
    assert "`feature/&lt;b&gt;x&lt;/b&gt;`" in text  # the branch is data too
    # the only raw angle brackets left are the report link perfgate made itself
    assert text.count("<") == 1


def test_escape():
    assert escape("<!here> & <@U123>") == "&lt;!here&gt; &amp; &lt;@U123&gt;"


def test_webhook_payload_is_data_with_names_verbatim(receiver):
    WebhookNotifier(receiver.url, "PERFGATE_WEBHOOK_URL", FAST).send(_summary())
    body = receiver.bodies[0]
    assert body["schema"] == SCHEMA
    assert (body["status"], body["model"], body["exit_code"]) == ("regression", "dqn", 1)
    assert body["counts"]["regressed"] == 6
    metrics = [r["metric"] for r in body["rows"]]
    assert set(metrics) == {"training_step_time_ms", *HOSTILE}  # JSON carries them safely, unchanged
    row = next(r for r in body["rows"] if r["metric"] == "training_step_time_ms")
    assert row["baseline"] == pytest.approx(10.0) and row["change"] == pytest.approx(0.3)
    assert body["url"] == "https://ci.example/run/1"


def test_many_regressions_are_capped():
    names = [f"m{i}_ms" for i in range(200)]
    summary = _summary(names=names)
    assert len(summary.rows) == MAX_ROWS and summary.more == 200 - MAX_ROWS


def test_retry_on_500_then_success(receiver):
    receiver.statuses = [500, 200]
    sleeps = Sleeps()
    attempts = post_json(receiver.url, {"x": 1}, FAST, sleep=sleeps)
    assert attempts == 2 and len(receiver.requests) == 2
    assert sleeps == [0.5]


def test_no_retry_on_400(receiver):
    receiver.statuses = [400, 200]
    sleeps = Sleeps()
    with pytest.raises(NotifyError, match="HTTP 400; not retried") as info:
        post_json(receiver.url, {"x": 1}, FAST, sleep=sleeps)
    assert len(receiver.requests) == 1 and sleeps == []
    assert info.value.attempts == 1 and not info.value.retriable


def test_attempts_are_bounded_with_exponential_backoff(receiver):
    receiver.statuses = [503]
    sleeps = Sleeps()
    with pytest.raises(NotifyError, match="HTTP 503") as info:
        post_json(receiver.url, {"x": 1}, FAST, sleep=sleeps)
    assert len(receiver.requests) == 3 and info.value.attempts == 3
    assert sleeps == [0.5, 1.0]


def test_redirects_are_not_followed(receiver):
    receiver.statuses = [302]
    with pytest.raises(NotifyError, match="HTTP 302"):
        post_json(receiver.url, {"x": 1}, FAST, sleep=Sleeps())
    assert len(receiver.requests) == 1


def test_timeout_on_a_server_that_never_answers(silent_server):
    policy = RetryPolicy(attempts=2, timeout=0.3, backoff=0.0)
    with pytest.raises(NotifyError, match=r"no answer within 0.3 s") as info:
        post_json(silent_server.url, {"x": 1}, policy, sleep=Sleeps())
    assert info.value.attempts == 2
    assert len(silent_server.connections) == 2


def test_connection_refused_is_retried(closed_port_url):
    sleeps = Sleeps()
    with pytest.raises(NotifyError, match="connection failed") as info:
        post_json(closed_port_url, {"x": 1}, FAST, sleep=sleeps)
    assert info.value.attempts == 3 and len(sleeps) == 2


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.com/x", "http:///nohost"])
def test_only_http_urls(url):
    with pytest.raises(NotifyError, match="http:// or https://"):
        post_json(url, {"x": 1}, FAST)


def test_error_messages_never_contain_the_url(receiver, silent_server, closed_port_url):
    receiver.statuses = [404]
    messages = []
    for url, policy in (
        (receiver.url, FAST),
        (silent_server.url, RetryPolicy(attempts=1, timeout=0.2)),
        (closed_port_url, RetryPolicy(attempts=1)),
    ):
        with pytest.raises(NotifyError) as info:
            post_json(url, {"x": 1}, policy, sleep=Sleeps())
        messages.append(str(info.value))
    assert all(SECRET_TOKEN not in m and "127.0.0.1" not in m for m in messages), messages


def test_notify_check_logs_masked_and_sends_to_both(receiver):
    lines: list[str] = []
    env = {"SLACK": receiver.url, "HOOK": receiver.url + "/generic", "GITHUB_SERVER_URL": "https://github.com"}
    config = NotifyConfig(slack_webhook_env="SLACK", webhook_url_env="HOOK", retry=FAST)
    deliveries = notify_check(make_result(), config, env, log=lines.append)
    assert [d.status for d in deliveries] == ["sent", "sent"]
    assert len(receiver.requests) == 2
    assert lines == ["perfgate notify: Slack webhook ($SLACK) sent", "perfgate notify: webhook ($HOOK) sent"]


def test_notify_check_failure_is_reported_without_the_secret(receiver):
    receiver.statuses = [500]
    lines: list[str] = []
    config = NotifyConfig(slack_webhook_env="SLACK", retry=RetryPolicy(attempts=2, backoff=0.0))
    (delivery,) = notify_check(make_result(), config, {"SLACK": receiver.url}, log=lines.append)
    assert delivery.status == "failed" and delivery.attempts == 2
    assert lines == ["perfgate notify: Slack webhook ($SLACK) failed after 2 attempt(s): the server answered HTTP 500"]
    assert SECRET_TOKEN not in repr(delivery)


def test_events_decide_whether_anything_is_sent(receiver):
    env = {"HOOK": receiver.url}
    unchanged = make_result(regress=1.0)
    improved = make_result(regress=1.0, improve=True, names=["a_ms", "b_ms"])
    only_regressions = NotifyConfig(webhook_url_env="HOOK", retry=FAST)
    assert notify_check(unchanged, only_regressions, env, log=print) == []
    assert notify_check(improved, only_regressions, env, log=print) == []
    assert receiver.requests == []
    also_improvements = NotifyConfig(webhook_url_env="HOOK", on=("regression", "improvement"), retry=FAST)
    (delivery,) = notify_check(improved, also_improvements, env, log=print)
    assert delivery.status == "sent"
    body = receiver.bodies[0]
    assert body["status"] == "improvement" and [r["kind"] for r in body["rows"]] == ["improved"]


def test_unset_secret_skips_the_target(receiver):
    lines: list[str] = []
    config = NotifyConfig(slack_webhook_env="NOT_SET_ANYWHERE", retry=FAST)
    (delivery,) = notify_check(make_result(), config, {"NOT_SET_ANYWHERE": "  "}, log=lines.append)
    assert delivery.status == "skipped"
    assert lines == ["perfgate notify: Slack webhook ($NOT_SET_ANYWHERE) skipped: $NOT_SET_ANYWHERE is not set"]


# --- credentials in the webhook URL ------------------------------------------------------------

HOOK_TOKEN = "hookTOKEN42"


def _basic(header: str | None) -> tuple[str, str]:
    assert header is not None and header.startswith("Basic ")
    user, _, password = base64.b64decode(header[6:]).decode("utf-8").partition(":")
    return user, password


@pytest.mark.parametrize("env_name", ["SLACK", "PERFGATE_WEBHOOK_URL"])
def test_webhook_userinfo_is_sent_as_basic_auth(receiver, env_name):
    """Regression for ``PERFGATE_WEBHOOK_URL=http://hook:TOKEN@127.0.0.1:2/hook``: the user and
    token went to the name resolver as part of the host and never as HTTP authentication."""
    url = receiver.url.replace("http://", f"http://hook:{HOOK_TOKEN}@") + f"?access_token={HOOK_TOKEN}#sig=x"
    config = (
        NotifyConfig(slack_webhook_env=env_name, retry=FAST)
        if env_name == "SLACK"
        else NotifyConfig(webhook_url_env=env_name, retry=FAST)
    )
    lines: list[str] = []
    with recording_resolver() as asked:
        (delivery,) = notify_check(make_result(), config, {env_name: url}, log=lines.append)
    assert delivery.status == "sent", delivery
    (request,) = receiver.requests
    assert _basic(request["headers"].get("Authorization")) == ("hook", HOOK_TOKEN)
    assert request["path"] == f"/services/T000/B000/{SECRET_TOKEN}?access_token={HOOK_TOKEN}"  # no fragment
    assert set(asked) == {"127.0.0.1"}
    assert HOOK_TOKEN not in "\n".join(lines)


def test_webhook_percent_encoded_userinfo_is_decoded(receiver):
    password = "t@k:en/#?%ü"
    url = receiver.url.replace("http://", f"http://h%3Ai%40ok:{quote(password, safe='')}@")
    with pytest.raises(NotifyError, match="a : in the user name"):
        post_json(url, {"x": 1}, FAST)
    url = receiver.url.replace("http://", f"http://h%40ok:{quote(password, safe='')}@")
    assert post_json(url, {"x": 1}, FAST) == 1
    assert _basic(receiver.requests[0]["headers"].get("Authorization")) == ("h@ok", password)


def test_webhook_password_never_reaches_the_resolver(closed_port_url):
    url = closed_port_url.replace("http://", f"http://hook:{HOOK_TOKEN}@")
    with recording_resolver() as asked, pytest.raises(NotifyError, match="connection failed"):
        post_json(url, {"x": 1}, RetryPolicy(attempts=1))
    assert asked and all(HOOK_TOKEN not in name for name in asked), asked


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        (f"http://hook:{HOOK_TOKEN}@/hook", "with a host"),
        (f"http://hook:to#{HOOK_TOKEN}@127.0.0.1:2/hook", "an @ after the host"),
        (f"http://hook:to?{HOOK_TOKEN}@127.0.0.1:2/hook", "an @ after the host"),
        (f"http://hook:to%{HOOK_TOKEN}@127.0.0.1:2/hook", "not a %XX escape"),
        (f"http://hook:{HOOK_TOKEN}@127.0.0.1:0/hook", "port"),
        (f"http://hook:{HOOK_TOKEN}@127.0.0.1:{HOOK_TOKEN}/hook", "port"),
        (f"http://hook:{HOOK_TOKEN} x@127.0.0.1:2/hook", "white space"),
    ],
)
def test_unusable_webhook_url_fails_in_one_line_without_the_secret(url, reason):
    """Regression for webhook URLs whose userinfo http.client could not read: the delivery
    fails on one line that names the variable and never shows the token or the URL."""
    lines: list[str] = []
    config = NotifyConfig(webhook_url_env="PERFGATE_WEBHOOK_URL", retry=FAST)
    with recording_resolver() as asked:
        (delivery,) = notify_check(make_result(), config, {"PERFGATE_WEBHOOK_URL": url}, log=lines.append)
    assert asked == []
    assert delivery.status == "failed" and delivery.attempts == 1
    (line,) = lines
    assert reason in delivery.detail and "$PERFGATE_WEBHOOK_URL" in delivery.detail and "internal error" not in line
    assert HOOK_TOKEN not in line and "127.0.0.1" not in line
