// Starts Swagger UI on /api/v1/docs. A file, not an inline script, so the page's
// Content-Security-Policy can forbid inline code.
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
    presets: [SwaggerUIBundle.presets.apis],
    layout: 'BaseLayout'
  });
});
