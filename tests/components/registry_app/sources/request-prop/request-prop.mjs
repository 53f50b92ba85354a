// http_request.execute() resolves to the axios response, as the registry's http components read it.
export default {
  key: "hwtest-registry-request-prop",
  name: "Registry request prop",
  version: "0.0.1",
  type: "source",
  props: { req: { type: "http_request", label: "Request" } },
  async run() {
    const response = await this.req.execute();
    this.$emit({
      status: response.status,
      contentType: response.headers["content-type"],
      data: response.data,
    }, { id: String(Date.now()) });
  },
};
