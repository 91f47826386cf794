"""The admin's PeriodicTask form: JSON fields that say where the error is, a time zone list,
task-name suggestions, and the name checked against entries other sources own."""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any, ClassVar
from zoneinfo import available_timezones

from django import forms
from django.core.exceptions import ValidationError
from django.forms.fields import JSONString
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from redisbeat.errors import EntryNotFound, InvalidEntry, RedisBeatError
from redisbeat.schedule.task_names import checking, registered_tasks, unknown_tasks

from .conf import celery_app, get_store, task_names
from .describe import default_zone
from .entries import SOURCE
from .models import PeriodicTask

log = logging.getLogger(__name__)

#: The admin's way to save a task name the Celery app does not register (the check box).
SKIP_LABEL = "Skip the task name check"
SKIP = f"tick \u201c{SKIP_LABEL}\u201d"

_JSON_INPUT = forms.Textarea(attrs={"rows": 2, "cols": 60, "spellcheck": "false"})


class _JSONValueField(forms.JSONField):
    """JSON of one type; a syntax error names its line and column. Empty means empty."""

    kind: type = object
    expected = ""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("widget", _JSON_INPUT)
        super().__init__(**kwargs)

    def to_python(self, value: Any) -> Any:
        if self.disabled:
            return value
        if value in self.empty_values or (isinstance(value, str) and not value.strip()):
            return self.kind()
        if isinstance(value, (list, dict, int, float, JSONString)):
            converted = value
        else:
            try:
                converted = json.loads(value, cls=self.decoder)
            except json.JSONDecodeError as exc:
                raise ValidationError(
                    "Invalid JSON: %(msg)s at line %(line)d, column %(column)d",
                    code="invalid",
                    params={"msg": exc.msg, "line": exc.lineno, "column": exc.colno},
                ) from None
        if not isinstance(converted, self.kind):
            raise ValidationError(self.expected, code="invalid_type")
        return converted


class JSONArrayField(_JSONValueField):
    kind = list
    expected = 'Must be a JSON array, e.g. [1, "a"].'


class JSONObjectField(_JSONValueField):
    kind = dict
    expected = 'Must be a JSON object, e.g. {"key": 1}.'


class DatalistInput(forms.TextInput):
    """A text input with a ``<datalist>`` of suggestions; any other text is allowed too."""

    def __init__(self, options: list[str], attrs: dict[str, Any] | None = None) -> None:
        super().__init__(attrs)
        self.options = options

    def get_context(self, name: str, value: Any, attrs: dict[str, Any] | None) -> dict[str, Any]:
        context = super().get_context(name, value, attrs)
        if self.options:
            context["widget"]["attrs"]["list"] = self._list_id(context["widget"]["attrs"], name)
        return context

    def render(
        self, name: str, value: Any, attrs: dict[str, Any] | None = None, renderer: Any = None
    ) -> SafeString:
        html = super().render(name, value, attrs, renderer)
        if not self.options:
            return html
        items = format_html_join("", '<option value="{}">', ((o,) for o in self.options))
        list_id = self._list_id(self.build_attrs(self.attrs, attrs), name)
        return format_html('{}<datalist id="{}">{}</datalist>', html, list_id, items)

    @staticmethod
    def _list_id(attrs: dict[str, Any], name: str) -> str:
        return f"{attrs.get('id') or 'id_' + name}_suggestions"


def timezone_choices() -> list[tuple[str, str]]:
    """Every IANA zone, sorted, after an empty choice meaning the Celery time zone."""
    empty = ("", f"Celery time zone ({default_zone()})")
    return [empty, *((z, z) for z in sorted(available_timezones()))]


def _suggested_tasks() -> list[str]:
    try:
        return task_names()
    except Exception:  # a broken Celery app must not break the form: plain input then
        log.warning("redisbeat: could not list the registered Celery tasks", exc_info=True)
        return []


def _unknown_task(name: str, task: str) -> str | None:
    """Why the Celery app would not run ``task`` (None: it would, or it cannot tell)."""
    try:
        app = celery_app()
        if not checking(app):
            return None
        registered = registered_tasks(app)
    except Exception:  # a broken Celery app leaves the check to the workers
        log.warning("redisbeat: could not list the registered Celery tasks", exc_info=True)
        return None
    problems = unknown_tasks([(name, task)], registered, app.main, SKIP)
    return problems[0].message if problems else None


if TYPE_CHECKING:
    _ModelForm = forms.ModelForm[PeriodicTask]
else:  # ModelForm is generic only in the stubs
    _ModelForm = forms.ModelForm


class PeriodicTaskForm(_ModelForm):
    """Schedule, task and routing of one periodic task; the model's ``clean`` checks the rest."""

    unregistered_ok = forms.BooleanField(
        required=False,
        label=SKIP_LABEL,
        help_text="Save a name the Celery app does not register (a task only workers import).",
    )

    class Meta:
        model = PeriodicTask
        fields = "__all__"
        field_classes: ClassVar[dict[str, type[forms.Field]]] = {
            "args": JSONArrayField,
            "kwargs": JSONObjectField,
            "headers": JSONObjectField,
        }
        widgets: ClassVar[dict[str, forms.Widget]] = {
            "description": forms.Textarea(attrs={"rows": 2, "cols": 60})
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "task" in self.fields:
            self.fields["task"].widget = DatalistInput(_suggested_tasks(), {"class": "vTextField"})
        if "timezone" in self.fields:
            old = self.fields["timezone"]
            choices = timezone_choices()
            current = self.instance.timezone
            if current and current not in dict(choices):  # let the model say what is wrong
                choices.append((current, current))
            self.fields["timezone"] = forms.ChoiceField(
                choices=choices, required=False, label=old.label, help_text=old.help_text
            )

    def _post_clean(self) -> None:
        # After the model's checks, which need the task on the instance (an error added
        # earlier takes it away); a name saved before is not checked again.
        super()._post_clean()  # type: ignore[misc]  # Django's hook, not in the stubs
        cleaned = self.cleaned_data
        task = cleaned.get("task")
        if task and "task" in self.changed_data and not cleaned.get("unregistered_ok"):
            problem = _unknown_task(cleaned.get("name") or "", task)
            if problem:
                self.add_error("task", ValidationError(problem, code="unregistered"))

    def clean_name(self) -> str:
        """Refuse a name another source (e.g. the beat_schedule setting) already uses."""
        name: str = self.cleaned_data["name"]
        try:
            owner = get_store().get(name).source
        except (EntryNotFound, InvalidEntry):
            return name
        except RedisBeatError:
            return name  # the sync will tell, once Redis answers
        if owner != SOURCE:
            raise ValidationError(
                "An entry of source %(owner)s (for example the beat_schedule setting) already "
                "uses this name; choose another.",
                code="foreign",
                params={"owner": repr(owner)},
            )
        return name
