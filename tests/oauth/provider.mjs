// A real OAuth 2.0 authorization server for the tests (the npm package oidc-provider, pinned in
// web/package-lock.json), on loopback, with what the tests need around it:
//   - one confidential client for Headwater's redirect URI, PKCE required, refresh tokens issued
//     and rotated (a refresh token used twice revokes its grant, as strict providers do);
//   - access tokens that live OIDC_ACCESS_TTL_S seconds (POST /test/access-ttl?s=N changes it);
//   - interactions that log the test user in and consent at once (GET /interaction/:uid
//     redirects back to the authorization endpoint): a client follows redirects, no form;
//   - a resource API (GET /api/me) that accepts only a live access token;
//   - /test/stats (token and API counters), /test/tokens (every token value issued), /test/revoke (every refresh token issued so far is
//     revoked), /test/fail-token?n=N (the next N token requests answer 503).
// Usage: node provider.mjs  (env: OIDC_WEB_DIR, OIDC_CLIENT_ID, OIDC_CLIENT_SECRET,
// OIDC_REDIRECT_URIS comma separated, OIDC_ACCESS_TTL_S). Prints {"port": N} once listening.
import http from 'node:http';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const webDir = process.env.OIDC_WEB_DIR;
const { default: Provider } = await import(pathToFileURL(path.join(webDir, 'node_modules/oidc-provider/lib/index.js')).href);

let accessTtlS = Number(process.env.OIDC_ACCESS_TTL_S || 2);
const ACCOUNT_ID = 'test-user';
const stats = { refresh_ok: 0, refresh_failed: 0, code_ok: 0, api_ok: 0, api_unauthorized: 0, failed_on_purpose: 0 };
const refreshTokens = [];
const issued = []; // every token value handed out, for the tests' grep for leaks
let failNext = 0;

const server = http.createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const { port } = server.address();
const issuer = `http://127.0.0.1:${port}`;

const provider = new Provider(issuer, {
  clients: [{
    client_id: process.env.OIDC_CLIENT_ID,
    client_secret: process.env.OIDC_CLIENT_SECRET,
    redirect_uris: process.env.OIDC_REDIRECT_URIS.split(','),
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_post',
  }],
  pkce: { required: () => true },
  scopes: ['openid', 'offline_access'],
  issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
  rotateRefreshToken: true,
  ttl: { AccessToken: () => accessTtlS, AuthorizationCode: 60, RefreshToken: 24 * 3600, Grant: 24 * 3600,
         Session: 3600, Interaction: 600, IdToken: 3600 },
  findAccount: async (_ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
  features: { devInteractions: { enabled: false }, revocation: { enabled: true } },
  interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
});
provider.proxy = false;

provider.on('grant.success', (ctx) => {
  if (ctx.oidc.params.grant_type === 'refresh_token') stats.refresh_ok += 1;
  if (ctx.oidc.params.grant_type === 'authorization_code') stats.code_ok += 1;
});
provider.on('grant.error', (ctx) => {
  if (ctx.oidc.params?.grant_type === 'refresh_token') stats.refresh_failed += 1;
});
provider.on('refresh_token.saved', (token) => { refreshTokens.push(token); issued.push(token.jti); });
provider.on('access_token.saved', (token) => issued.push(token.jti));

provider.use(async (ctx, next) => {
  if (ctx.path === '/token' && failNext > 0) {
    failNext -= 1;
    stats.failed_on_purpose += 1;
    ctx.status = 503;
    ctx.body = 'temporarily unavailable';
    return;
  }
  await next();
});

async function interaction(req, res) {
  const details = await provider.interactionDetails(req, res);
  if (details.prompt.name === 'login') {
    await provider.interactionFinished(req, res, { login: { accountId: ACCOUNT_ID } }, { mergeWithLastSubmission: false });
    return;
  }
  const grant = details.grantId
    ? await provider.Grant.find(details.grantId)
    : new provider.Grant({ accountId: details.session.accountId, clientId: details.params.client_id });
  const missing = details.prompt.details;
  if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
  if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
  for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes || {})) {
    grant.addResourceScope(indicator, scopes.join(' '));
  }
  const grantId = await grant.save();
  await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
}

async function api(req, res) {
  const auth = req.headers.authorization || '';
  const token = auth.startsWith('Bearer ') ? await provider.AccessToken.find(auth.slice(7)) : undefined;
  if (!token || token.isExpired) {
    stats.api_unauthorized += 1;
    json(res, 401, { error: 'invalid_token' });
    return;
  }
  stats.api_ok += 1;
  json(res, 200, { sub: token.accountId, n: stats.api_ok });
}

function json(res, status, body) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

const callback = provider.callback();
server.on('request', (req, res) => {
  const url = new URL(req.url, issuer);
  const fail = (err) => json(res, 500, { error: String(err && err.message) });
  if (url.pathname.startsWith('/interaction/')) return interaction(req, res).catch(fail);
  if (url.pathname === '/api/me') return api(req, res).catch(fail);
  if (url.pathname === '/test/stats') return json(res, 200, stats);
  if (url.pathname === '/test/tokens') return json(res, 200, { issued });
  if (url.pathname === '/test/revoke' && req.method === 'POST') {
    return Promise.all(refreshTokens.splice(0).map((t) => t.destroy()))
      .then((done) => json(res, 200, { revoked: done.length })).catch(fail);
  }
  if (url.pathname === '/test/access-ttl' && req.method === 'POST') {
    accessTtlS = Number(url.searchParams.get('s'));
    return json(res, 200, { access_ttl_s: accessTtlS });
  }
  if (url.pathname === '/test/fail-token' && req.method === 'POST') {
    failNext = Number(url.searchParams.get('n') || 1);
    return json(res, 200, { fail_next: failNext });
  }
  return callback(req, res);
});

process.stdout.write(`${JSON.stringify({ port })}\n`);
