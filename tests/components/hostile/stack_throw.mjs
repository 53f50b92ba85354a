// Threat 7: an error whose stack would carry the runner's frames and the host's paths.
function deeper(n) {
  if (n === 0) throw new Error("thrown from the component");
  return deeper(n - 1);
}

export default {
  name: "Hostile stack",
  version: "0.0.1",
  props: { http: "$.interface.http" },
  async run() {
    console.log(new Error("logged from the component"));
    deeper(2);
  },
};
