// The reference dashboard's "Delete account" (Chatwoot 4.15, account settings), driven
// through its own code against Frontdesk (SPEC 20): the `accounts` store module's
// toggleDeletion action over dashboard/api/enterprise/account.js, then the store's `get`
// and the account record the settings page reads (custom_attributes.marked_for_deletion_at
// and marked_for_deletion_reason), a save of the settings form while scheduled, and the
// cancellation.
//
//   node --import HARNESS/harness/register.mjs tests/clients/toggle_deletion.mjs HARNESS BASE_URL
//
// HARNESS is a copy of ../shared/clients/chatwoot with its node_modules installed
// (tests/test_deletion_schedule_client.py makes it); its dashboard-kit.mjs loads the
// CURRENT dashboard's modules unchanged. DATABASE_URL: the instance's database, where
// the confirmation link of the sign-up is read from mail_outbox. Prints one JSON
// document: what each step saw; the test judges it.
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [harnessDir, baseArg] = process.argv.slice(2);
if (!harnessDir || !baseArg) {
  console.error('usage: toggle_deletion.mjs HARNESS BASE_URL');
  process.exit(2);
}
const fromHarness = file => import(pathToFileURL(path.join(harnessDir, 'harness', file)).href);
// dashboard-kit.mjs loads vue and vuex before the browser globals exist, as it must.
const { loadDashboard } = await fromHarness('dashboard-kit.mjs');
const { closeMail } = await fromHarness('mail.mjs');

const d = await loadDashboard(baseArg.replace(/\/+$/, ''), 'toggle-deletion');
const stamp = `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
const email = `cw-deletion-${stamp}@example.com`;
const result = { email, steps: {} };

// The HTTP exchanges of `fn` (the recorder of the harness), and what it threw.
async function step(name, fn) {
  const m = d.mark();
  let error = null;
  let value = null;
  try {
    value = await fn();
  } catch (e) {
    error = String(e?.message ?? e);
  }
  const calls = d.since(m).map(e => ({ method: e.method, url: e.url, status: e.status, data: e.data }));
  result.steps[name] = { calls, error, value };
}

// What the settings page reads: the current account's record in the store.
const record = accountId => {
  const account = d.store.getters['accounts/getAccount'](accountId);
  const { custom_attributes: attributes = {} } = account;
  return {
    name: account.name,
    custom_attributes: attributes,
    marked_for_deletion_at: attributes.marked_for_deletion_at ?? null,
    marked_for_deletion_reason: attributes.marked_for_deletion_reason ?? null,
    // the page shows new Date(marked_for_deletion_at)
    shown_date: attributes.marked_for_deletion_at ? new Date(attributes.marked_for_deletion_at).toISOString() : null,
    is_updating: d.store.getters['accounts/getUIFlags'].isUpdating,
  };
};

const setupProblem = await d.signUpAndConfirm(email, 'Passw0rd!deletion');
if (setupProblem) {
  result.setup_problem = setupProblem;
} else {
  // The session of the confirmation link; the dashboard boots and goes to the settings.
  await d.openPage('/app/');
  const accountId = d.user().account_id;
  result.account_id = accountId;
  await d.openPage(`/app/accounts/${accountId}/settings/general`);
  await step('load', async () => {
    await d.store.dispatch('accounts/get');
    return record(accountId);
  });
  await step('delete', async () => {
    await d.store.dispatch('accounts/toggleDeletion', { action_type: 'delete' });
    return record(accountId);
  });
  await step('reload', async () => {
    await d.store.dispatch('accounts/get');
    return record(accountId);
  });
  // The form is filled from the stored record and sends every field back
  // (settings/account/Index.vue).
  await step('save settings', async () => {
    const rec = d.store.getters['accounts/getAccount'](accountId);
    await d.store.dispatch('accounts/update', {
      locale: rec.locale,
      name: `Leaving ${stamp}`,
      domain: rec.domain,
      support_email: rec.support_email,
    });
    await d.store.dispatch('accounts/get');
    return record(accountId);
  });
  await step('delete again', async () => {
    await d.store.dispatch('accounts/toggleDeletion', { action_type: 'delete' });
    await d.store.dispatch('accounts/get');
    return record(accountId);
  });
  // A page of a later release with an action this one does not know.
  await step('unknown action', async () => {
    await d.store.dispatch('accounts/toggleDeletion', { action_type: 'purge' });
  });
  await step('undelete', async () => {
    await d.store.dispatch('accounts/toggleDeletion', { action_type: 'undelete' });
    await d.store.dispatch('accounts/get');
    return record(accountId);
  });
  // A full page load afterwards shows the same.
  await d.openPage(`/app/accounts/${accountId}/settings/general`);
  await step('page load', async () => {
    await d.store.dispatch('accounts/get');
    return record(accountId);
  });
}
await closeMail();
console.log(JSON.stringify(result));
process.exit(0);
