// Uses /api/v1/docs in headless Chromium as a person would: "Try it out" on
// POST /auth/sign_in with an e-mail and password, then "Try it out" on GET
// /api/v1/profile, with no Authorize dialog in between, then sign-out and the profile
// again. Prints what the page showed, as JSON: per call, the status and body of its live
// response and the request headers of the curl command the page displays.
// Usage: node docs_page.mjs BASE_URL EMAIL PASSWORD SCREENSHOT
import { chromium } from 'playwright-core';

const [baseUrl, email, password, screenshot] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  // No network but the service (the machine has none), no sandbox (tests run as root).
  args: [
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
  ],
});
const page = await browser.newPage();
const errors = [];
page.on('pageerror', (error) => errors.push(String(error)));

async function tryOut(operation, body) {
  const block = page.locator(`[id^="operations-"][id$="-${operation}"]`);
  if (!(await block.locator('button.try-out__btn').isVisible())) {
    await block.locator('.opblock-summary-control').click();
  }
  const tryOutButton = block.locator('button.try-out__btn');
  if ((await tryOutButton.textContent()).trim() === 'Try it out') {
    await tryOutButton.click();
  }
  if (body !== undefined) {
    await block.locator('textarea.body-param__text').fill(JSON.stringify(body));
  }
  await block.locator('button.execute').click();
  const live = block.locator('.live-responses-table .response');
  await live.first().waitFor();
  const status = Number((await live.locator('.response-col_status').first().textContent()).trim());
  const text = await live.locator('.response-col_description pre').first().textContent();
  const curl = await block.locator('.curl-command pre, .curl-command code').first().textContent();
  const headers = [...curl.matchAll(/-H '([^:]+):/g)].map((match) => match[1].toLowerCase());
  // Cleared, so that a later call of the same operation waits for its own answer.
  await block.locator('button.btn-clear').click();
  return { status, body: JSON.parse(text), headers };
}

const result = {};
try {
  await page.goto(`${baseUrl}/api/v1/docs`);
  await page.locator('.opblock').first().waitFor();
  result.signIn = await tryOut('post_auth_sign_in', { email, password });
  result.profile = await tryOut('get_api_v1_profile');
  result.sessions = await tryOut('get_api_v1_profile_sessions');
  result.signOut = await tryOut('delete_auth_sign_out');
  result.afterSignOut = await tryOut('get_api_v1_profile');
} finally {
  if (screenshot) {
    await page.screenshot({ path: screenshot, fullPage: false });
  }
  await browser.close();
}
result.errors = errors;
console.log(JSON.stringify(result));
