"""Deciding, building the targets, sending, and reporting each delivery with secrets masked."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from perfgate.core.compare import CheckResult
from perfgate.notify._message import events_of, summarize_check
from perfgate.notify.base import Notifier, NotifyError, mask
from perfgate.notify.settings import NotifyConfig
from perfgate.safe.redact import smtp_secrets, url_secrets

__all__ = ["Delivery", "build_targets", "maybe_notify", "notify_check", "run_url", "secrets_of"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Delivery:
    """What happened to one target: ``sent``, ``failed`` or ``skipped``, in secret-free words."""

    target: str
    status: str
    detail: str = ""
    attempts: int = 0


def _env(env: Mapping[str, str], name: str | None) -> str | None:
    value = env.get(name or "", "").strip() if name else ""
    return value or None


def secrets_of(config: NotifyConfig, env: Mapping[str, str]) -> list[str]:
    """The secret values the configuration points at (to mask them wherever text is printed)."""
    names = (config.slack_webhook_env, config.webhook_url_env, config.smtp_user_env, config.smtp_password_env)
    values = [v for v in (_env(env, n) for n in names) if v]
    # what a server may echo of the login, and what a webhook URL carries
    values += smtp_secrets(_env(env, config.smtp_user_env), _env(env, config.smtp_password_env))
    for name in (config.slack_webhook_env, config.webhook_url_env):
        values += url_secrets(_env(env, name))
    return values


def build_targets(
    config: NotifyConfig,
    env: Mapping[str, str],
    *,
    sleep: Callable[[float], None] | None = None,
) -> tuple[list[Notifier], list[Delivery]]:
    """The targets whose secrets are present, and a ``skipped`` delivery for each that is not."""
    targets: list[Notifier] = []
    skipped: list[Delivery] = []
    policy = config.retry
    if config.slack_webhook_env:
        from perfgate.notify.slack import SlackNotifier

        url = _env(env, config.slack_webhook_env)
        if url:
            targets.append(SlackNotifier(url, config.slack_webhook_env, policy, sleep))
        else:
            skipped.append(_unset(f"Slack webhook (${config.slack_webhook_env})", config.slack_webhook_env))
    if config.webhook_url_env:
        from perfgate.notify.webhook import WebhookNotifier

        url = _env(env, config.webhook_url_env)
        if url:
            targets.append(WebhookNotifier(url, config.webhook_url_env, policy, sleep))
        else:
            skipped.append(_unset(f"webhook (${config.webhook_url_env})", config.webhook_url_env))
    if config.smtp_host and config.email_to:
        from perfgate.notify.smtp import SmtpNotifier

        user = _env(env, config.smtp_user_env)
        password = _env(env, config.smtp_password_env)
        notifier = SmtpNotifier(
            host=config.smtp_host,
            port=config.smtp_port,
            sender=config.email_from or user or "perfgate@localhost",
            recipients=config.email_to,
            policy=policy,
            user=user,
            password=password,
            starttls=config.smtp_starttls,
            cafile=config.smtp_cafile,
            sleep=sleep,
        )
        missing = [n for n, v in ((config.smtp_user_env, user), (config.smtp_password_env, password)) if n and not v]
        if missing:
            skipped.append(_unset(notifier.target, *missing))
        else:
            targets.append(notifier)
    return targets, skipped


def _unset(target: str, *names: str) -> Delivery:
    listed = ", ".join(f"${n}" for n in names)
    return Delivery(target=target, status="skipped", detail=f"{listed} is not set")


def run_url(env: Mapping[str, str]) -> str | None:
    """The CI run's page, when running in GitHub Actions (the notification links to it)."""
    server, repo, run_id = (env.get(k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"))
    if server and repo and run_id:
        return f"{server}/{repo}/actions/runs/{run_id}"
    return None


def notify_check(
    result: CheckResult,
    config: NotifyConfig,
    env: Mapping[str, str],
    *,
    log: Callable[[str], None],
    sleep: Callable[[float], None] | None = None,
) -> list[Delivery]:
    """Notify the configured targets about ``result`` if its events are wanted; never raises.

    Every line given to ``log`` has the configured secrets masked.
    """
    secrets = secrets_of(config, env)

    def say(text: str) -> None:
        log(mask(text, secrets))

    events = tuple(e for e in events_of(result) if e in config.on)
    if not events:
        return []
    if not config.has_targets:
        say("perfgate notify: no targets configured (see [tool.perfgate.notify] in the README)")
        return []
    targets, deliveries = build_targets(config, env, sleep=sleep)
    summary = summarize_check(result, events, url=run_url(env))
    for notifier in targets:
        try:
            attempts = notifier.send(summary)
        except NotifyError as exc:
            deliveries.append(Delivery(target=notifier.target, status="failed", detail=str(exc), attempts=exc.attempts))
        except Exception as exc:  # a bug in a channel must not turn a verdict into a crash
            deliveries.append(
                Delivery(target=notifier.target, status="failed", detail=f"internal error: {type(exc).__name__}")
            )
        else:
            deliveries.append(Delivery(target=notifier.target, status="sent", attempts=attempts))
    for d in deliveries:
        tries = f" after {d.attempts} attempt(s)" if d.attempts > 1 or d.status == "failed" else ""
        detail = f": {d.detail}" if d.detail else ""
        say(f"perfgate notify: {d.target} {d.status}{tries}{detail}")
    return [
        Delivery(target=d.target, status=d.status, detail=mask(d.detail, secrets), attempts=d.attempts)
        for d in deliveries
    ]


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def maybe_notify(
    result: CheckResult,
    config: NotifyConfig,
    requested: bool | None,
    *,
    env: Mapping[str, str] | None = None,
    log: Callable[[str], None] = _stderr,
) -> list[Delivery]:
    """The ``perfgate check`` hook: notify when ``--notify`` was given, or the configuration enables it.

    ``requested`` is the flag (``None`` when neither ``--notify`` nor ``--no-notify`` was
    given). Never raises; the check's exit code is the caller's and stays as it was.
    """
    if not (config.enabled if requested is None else requested):
        return []
    try:
        return notify_check(result, config, os.environ if env is None else env, log=log)
    except Exception as exc:  # never let a notification bug change the verdict
        log(f"perfgate notify: internal error ({type(exc).__name__}); no notification sent")
        return []
