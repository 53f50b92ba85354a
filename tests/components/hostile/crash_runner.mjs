// Threat 4: bring down the runner process (and every run in it). process.abort() is refused in a
// worker thread, so the process is killed outright.
export default {
  name: "Hostile crash",
  version: "0.0.1",
  props: { http: "$.interface.http" },
  async run() {
    try {
      process.abort();
    } catch {
      process.kill(process.pid, "SIGKILL");
    }
  },
};
