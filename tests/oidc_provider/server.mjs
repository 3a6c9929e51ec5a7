// A real OpenID Connect provider for the tests of single sign-on (SPEC 19): panva's
// oidc-provider, pinned by package-lock.json, on 127.0.0.1 only.
//
//   node server.mjs PORT        (or OIDC_PROVIDER_PORT=PORT node server.mjs)
//
// Issuer http://127.0.0.1:PORT. Prints one line on stdout when it listens; errors go to
// stderr. tests/support/oidc_provider.py starts it (fixture `oidc_provider`), registers
// each test's client by open dynamic registration (POST /reg) and its people by
// POST /_test/accounts {sub, email, email_verified, name, amr}; tests/support/
// sso_browser.py signs in through the forms below as a person would.
//
// What it adds to the package's defaults, and why:
// - its own sign-in interaction instead of devInteractions, on the same pattern (a form
//   with `login`, then a consent form, each with a Cancel link), because devInteractions
//   cannot give the session an `amr`: the ID token carries the `amr` registered for the
//   account (`["pwd"]` when none was registered, none for []), which trust_idp_mfa
//   needs. An address nobody registered signs in as itself, email_verified true. The
//   registered claims are passed as given (a string "true" stays a string), so tests can
//   make the provider say what real ones sometimes do;
// - email, email_verified and name in the ID token itself (conformIdTokenClaims off), as
//   the providers Frontdesk meets do; `sid` comes with backchannel_logout_session_required;
// - PKCE required; back-channel logout, sent when the browser confirms RP-initiated logout;
// - outgoing requests (the logout tokens) may reach loopback: the package refuses
//   special-use addresses by default, and the relying parties of the tests live there.
import { generateKeyPairSync, randomBytes, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';

import Provider from 'oidc-provider';

const port = Number(process.argv[2] ?? process.env.OIDC_PROVIDER_PORT);
if (!Number.isInteger(port) || port <= 0) {
  console.error('usage: node server.mjs PORT (or OIDC_PROVIDER_PORT=PORT)');
  process.exit(2);
}
const issuer = `http://127.0.0.1:${port}`;
const BODY_LIMIT = 64 * 1024;

// Accounts by sub; the sign-in form looks them up by e-mail address.
const accounts = new Map();

function addAccount({ sub, email, email_verified: verified = true, name, amr }) {
  const account = {
    sub: sub || randomUUID(), email, email_verified: verified, name, amr,
  };
  accounts.set(account.sub, account);
  return account;
}

function accountForLogin(login) {
  for (const account of accounts.values()) {
    if (account.email.toLowerCase() === login.toLowerCase()) return account;
  }
  return addAccount({ email: login });
}

async function findAccount(ctx, sub) {
  const account = accounts.get(sub);
  if (!account) return undefined;
  return {
    accountId: sub,
    async claims() {
      const { email, email_verified: verified, name } = account;
      return { sub, email, email_verified: verified, ...(name ? { name } : {}) };
    },
  };
}

const escapeHtml = (value) => String(value).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function page(title, body) {
  return `<!DOCTYPE html><html><head><meta charset="utf-8"><title>${escapeHtml(title)}</title></head>`
    + `<body><h1>${escapeHtml(title)}</h1>${body}</body></html>`;
}

async function readBody(ctx) {
  const chunks = [];
  let size = 0;
  for await (const chunk of ctx.req) {
    size += chunk.length;
    if (size > BODY_LIMIT) ctx.throw(413, 'body too large');
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingKey = {
  ...privateKey.export({ format: 'jwk' }), kid: randomUUID(), use: 'sig', alg: 'RS256',
};

const provider = new Provider(issuer, {
  jwks: { keys: [signingKey] },
  cookies: { keys: [randomBytes(32).toString('hex')] },
  findAccount,
  // The package's defaults, and the claims of the scopes Frontdesk asks for. `amr` goes
  // with `openid`, as the providers Frontdesk meets send it: the package would put it in
  // an ID token only when a `claims` request parameter asks for it.
  claims: {
    acr: null,
    auth_time: null,
    iss: null,
    sid: null,
    openid: ['sub', 'amr'],
    email: ['email', 'email_verified'],
    profile: ['name'],
  },
  conformIdTokenClaims: false,
  pkce: { required: () => true },
  // Seconds; given so the package does not warn that they are its defaults.
  ttl: {
    AccessToken: 600,
    AuthorizationCode: 60,
    Grant: 3600,
    IdToken: 600,
    Interaction: 600,
    Session: 3600,
  },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  features: {
    devInteractions: { enabled: false },
    // Open: each test registers its own client; only loopback can reach this server.
    registration: { enabled: true },
    backchannelLogout: { enabled: true },
    rpInitiatedLogout: {
      enabled: true,
      // The package's page puts the buttons outside the form (form="op.logoutForm");
      // here they are inside it, so a plain form parser sees them.
      async logoutSource(ctx, form) {
        const buttons = '<button type="submit" name="logout" value="yes">Yes, sign me out</button>'
          + '<button type="submit">No, stay signed in</button></form>';
        ctx.body = page('Sign out', form.replace('</form>', buttons));
      },
      async postLogoutSuccessSource(ctx) {
        ctx.body = page('Signed out', '<p>You are signed out.</p>');
      },
    },
  },
  // NOTE: the package's fetch goes through a dispatcher that destroys sockets to
  // special-use addresses (loopback included); the tests' relying parties are on
  // loopback, so the back-channel logout tokens go out without it. The package's
  // 2.5 s timeout (options.signal) stays.
  fetch(url, options) {
    const { dispatcher, ...rest } = options;
    return globalThis.fetch(url, rest);
  },
  async renderError(ctx, out) {
    ctx.type = 'html';
    ctx.body = page('Error', `<pre id="error">${escapeHtml(JSON.stringify(out))}</pre>`);
  },
});

// A refusal a test provokes is one line; what the provider did not mean to do (a server
// error, a logout token it could not deliver) comes with its stack.
for (const event of [
  'authorization.error', 'grant.error', 'end_session.error', 'registration_create.error',
  'userinfo.error', 'jwks.error', 'discovery.error', 'introspection.error',
]) {
  provider.on(event, (ctx, err) => {
    const detail = err.error_detail ? ` (${err.error_detail})` : '';
    console.error(`oidc-provider ${event}: ${err.error || err.name}: `
      + `${err.error_description || err.message}${detail}`);
  });
}
provider.on('server_error', (ctx, err) => console.error('oidc-provider server_error:', err));
provider.on('backchannel.error', (ctx, err, client) => {
  console.error(`oidc-provider backchannel.error: ${client.backchannelLogoutUri}:`, err);
});
provider.on('backchannel.success', (ctx, client) => {
  console.log(`oidc-provider back-channel logout sent to ${client.backchannelLogoutUri}`);
});

function loginForm(uid, params) {
  const hint = params.login_hint ? ` value="${escapeHtml(params.login_hint)}"` : '';
  return page('Sign in', `<form method="post" action="/interaction/${uid}">`
    + '<input type="hidden" name="prompt" value="login">'
    + `<label>E-mail address <input required type="email" name="login"${hint}></label>`
    + '<label>Password <input type="password" name="password"></label>'
    + '<button type="submit">Sign in</button></form>'
    + `<a href="/interaction/${uid}/abort">Cancel</a>`);
}

function consentForm(uid, client, details) {
  const scopes = (details.missingOIDCScope || []).map((s) => `<li>${escapeHtml(s)}</li>`).join('');
  return page('Authorize', `<p>${escapeHtml(client.clientName || client.clientId)} asks for:</p>`
    + `<ul>${scopes}</ul><form method="post" action="/interaction/${uid}">`
    + '<input type="hidden" name="prompt" value="consent">'
    + '<button type="submit">Continue</button></form>'
    + `<a href="/interaction/${uid}/abort">Cancel</a>`);
}

async function consentGrant(details, session, params) {
  const { grantId, prompt } = details;
  const grant = grantId
    ? await provider.Grant.find(grantId)
    : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
  if (prompt.details.missingOIDCScope) {
    grant.addOIDCScope(prompt.details.missingOIDCScope.join(' '));
  }
  if (prompt.details.missingOIDCClaims) grant.addOIDCClaims(prompt.details.missingOIDCClaims);
  return grant.save();
}

async function interaction(ctx, uid, action) {
  const details = await provider.interactionDetails(ctx.req, ctx.res);
  const { prompt, params, session } = details;
  if (details.uid !== uid) ctx.throw(400, 'interaction mismatch');
  let result;
  if (action === 'abort') {
    result = { error: 'access_denied', error_description: 'End-User aborted interaction' };
  } else if (ctx.method === 'GET') {
    ctx.set('Cache-Control', 'no-store');
    ctx.type = 'html';
    if (prompt.name === 'login') {
      ctx.body = loginForm(uid, params);
    } else {
      const client = await provider.Client.find(params.client_id);
      ctx.body = consentForm(uid, client, prompt.details);
    }
    return;
  } else {
    const form = new URLSearchParams(await readBody(ctx));
    if (form.get('prompt') !== prompt.name) ctx.throw(400, `expected the ${prompt.name} form`);
    if (prompt.name === 'login') {
      const login = (form.get('login') || '').trim();
      if (!login) ctx.throw(400, 'login is required');
      const account = accountForLogin(login);
      const amr = account.amr === undefined ? ['pwd'] : account.amr;
      result = { login: { accountId: account.sub, ...(amr.length ? { amr } : {}) } };
    } else {
      result = { consent: { grantId: await consentGrant(details, session, params) } };
    }
  }
  const returnTo = await provider.interactionResult(ctx.req, ctx.res, result, {
    mergeWithLastSubmission: prompt.name === 'consent',
  });
  ctx.status = 303;
  ctx.redirect(returnTo);
}

function isLoopback(address) {
  return address === '127.0.0.1' || address === '::1' || address === '::ffff:127.0.0.1';
}

provider.use(async (ctx, next) => {
  if (!isLoopback(ctx.req.socket.remoteAddress)) ctx.throw(403, 'loopback only');
  const match = ctx.path.match(/^\/interaction\/([\w-]+)(\/abort)?$/);
  if (match && (ctx.method === 'GET' || (ctx.method === 'POST' && !match[2]))) {
    await interaction(ctx, match[1], match[2] ? 'abort' : 'submit');
    return;
  }
  if (ctx.path === '/_test/accounts' && ctx.method === 'POST') {
    let doc;
    try {
      doc = JSON.parse(await readBody(ctx));
    } catch {
      ctx.throw(400, 'body must be JSON');
    }
    if (typeof doc?.email !== 'string' || !doc.email
        || (doc.amr !== undefined && doc.amr !== null && !Array.isArray(doc.amr))) {
      ctx.throw(400, 'expected {sub?, email, email_verified?, name?, amr?: [...]}');
    }
    const account = addAccount({ ...doc, amr: doc.amr ?? undefined });
    ctx.status = 201;
    ctx.body = { sub: account.sub };
    return;
  }
  await next();
});

const server = createServer(provider.callback());
server.on('clientError', (err, socket) => {
  console.error('oidc-provider clientError:', err.message);
  socket.destroy();
});
server.listen(port, '127.0.0.1', () => {
  console.log(`oidc-provider listening on ${issuer}`);
});
process.on('SIGTERM', () => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
});
