const REGIONS = {
  us: "https://api.mailgun.net/v3",
  eu: "https://api.eu.mailgun.net/v3",
};

function baseUrl(region) {
  const url = REGIONS[region];
  if (!url) {
    throw new Error(`Unknown Mailgun region "${region}"`);
  }
  return url;
}

const BASE_URL = baseUrl("ap");

export default {
  key: "bad-mailgun-send",
  name: "Send Email",
  version: "0.0.1",
  type: "action",
  props: {
    to: {
      type: "string",
      label: "To",
    },
  },
  async run({ $ }) {
    $.export("$summary", `Would post to ${BASE_URL}`);
  },
};
