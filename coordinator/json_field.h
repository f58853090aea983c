// A request body's field that is present and not null, for nlohmann::json
// and nlohmann::ordered_json alike (OpenAI treats an explicit null as absent).
#pragma once

namespace specserve::openai {

template <typename Json>
const Json* Field(const Json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

}  // namespace specserve::openai
