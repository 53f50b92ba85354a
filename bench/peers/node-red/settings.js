// Node-RED settings for `make bench`: bound to loopback, editor and admin API off (no auth needed),
// no telemetry, no projects, quiet logs. bench/targets.py copies this file and flows.json into a
// temporary userDir and passes the port in BENCH_NODE_RED_PORT.
module.exports = {
  uiHost: "127.0.0.1",
  uiPort: Number(process.env.BENCH_NODE_RED_PORT || 1880),
  flowFile: "flows.json",
  credentialSecret: false,
  httpAdminRoot: false,
  httpNodeRoot: "/",
  httpStatic: false,
  disableEditor: true,
  logging: { console: { level: "warn", metrics: false, audit: false } },
  editorTheme: { projects: { enabled: false } },
  diagnostics: { enabled: false, ui: false },
  telemetry: { enabled: false, updateNotification: false },
  externalModules: { autoInstall: false, palette: { allowInstall: false } },
  functionExternalModules: false,
  functionGlobalContext: {},
};
