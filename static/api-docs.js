// Starts Swagger UI on /api/v1/docs. A file, not an inline script, so the page's
// Content-Security-Policy can forbid inline code.
//
// Signing in is the one Authorize step: an answer that carries the token headers (a
// sign-in's "Try it out", a sign-up, a confirmation, a password reset, and every
// signed-in answer after them) authorizes the page with its access-token, client and
// uid, so every later "Try it out" sends them. A sign-out forgets them. The Authorize
// dialog shows them, and still takes an api_access_token pasted by hand. Nothing is
// kept once the page is closed.
var TOKEN_SCHEMES = { accessToken: 'access-token', client: 'client', uid: 'uid' };

function keepTokenHeaders(response) {
  var headers = response.headers || {};
  var schemes = Object.keys(TOKEN_SCHEMES);
  if (response.ok && /\/auth\/sign_out(\.json)?$/.test(new URL(response.url).pathname)) {
    window.ui.authActions.logout(schemes);
  } else if (schemes.every(function (name) { return headers[TOKEN_SCHEMES[name]]; })) {
    schemes.forEach(function (name) {
      window.ui.preauthorizeApiKey(name, headers[TOKEN_SCHEMES[name]]);
    });
  }
  return response;
}

window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({
    url: '/api/v1/openapi.json',
    dom_id: '#swagger-ui',
    deepLinking: true,
    // Every operation shown with its tag's list open, so a reader (and the browser test)
    // sees them all without clicking.
    docExpansion: 'list',
    defaultModelsExpandDepth: 0,
    displayRequestDuration: true,
    // No call to the public validator service: the page works offline.
    validatorUrl: null,
    responseInterceptor: keepTokenHeaders,
    presets: [SwaggerUIBundle.presets.apis],
    layout: 'BaseLayout'
  });
});
