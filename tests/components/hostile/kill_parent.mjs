// Threat 2: kill the process that started this one (the service, without a pid namespace) and pid 1.
export default {
  name: "Hostile kill",
  version: "0.0.1",
  props: { http: "$.interface.http" },
  async run() {
    const tried = { pid: process.pid, ppid: process.ppid };
    for (const [name, pid] of [["parent", process.ppid], ["init", 1]]) {
      try {
        tried[name] = process.kill(pid, "SIGKILL");
      } catch (e) {
        tried[name] = e.code;
      }
    }
    this.$emit(tried);
  },
};
