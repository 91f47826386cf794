// Show only the schedule fields of the chosen kind. Without JS every field shows and the
// ones of other kinds are ignored on save.
'use strict';
(function () {
  const KINDS = {
    every: ['interval'], period: ['interval'],
    minute: ['crontab'], hour: ['crontab'], day_of_month: ['crontab'],
    month_of_year: ['crontab'], day_of_week: ['crontab'],
    cron_expression: ['cron'], timezone: ['crontab', 'cron'],
    dst_gap: ['crontab', 'cron'], dst_fold: ['crontab', 'cron'],
    clocked_at: ['clocked'],
    solar_event: ['solar'], latitude: ['solar'], longitude: ['solar'],
  };

  function kindsOf(row) {
    for (const name of Object.keys(KINDS)) {
      if (row.classList.contains('field-' + name)) return KINDS[name];
    }
    return null;
  }

  function update(form) {
    const checked = form.querySelector('input[name="kind"]:checked');
    if (!checked) return;
    for (const row of form.querySelectorAll('fieldset.rb-schedule .form-row')) {
      const kinds = kindsOf(row);
      if (kinds) row.classList.toggle('hidden', !kinds.includes(checked.value));
    }
  }

  window.addEventListener('load', function () {
    const form = document.getElementById('periodictask_form');
    if (!form) return;
    for (const input of form.querySelectorAll('input[name="kind"]')) {
      input.addEventListener('change', function () { update(form); });
    }
    update(form);
  });
})();
