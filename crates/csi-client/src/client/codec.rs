//! A tonic codec for prost-reflect dynamic messages, so any CSI RPC can be called from a
//! request built at run time (suites, `csi-conform call`) without a match over every method.

use prost::Message;
use prost_reflect::{DynamicMessage, MessageDescriptor};
use tonic::{
    Status,
    codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder},
};

/// Encodes a [`DynamicMessage`] request and decodes responses of a known descriptor.
#[derive(Debug, Clone)]
pub struct DynamicCodec {
    response: MessageDescriptor,
}

impl DynamicCodec {
    /// A codec whose decoder produces messages of type `response`.
    pub fn new(response: MessageDescriptor) -> Self {
        DynamicCodec { response }
    }
}

impl Codec for DynamicCodec {
    type Encode = DynamicMessage;
    type Decode = DynamicMessage;
    type Encoder = DynamicEncoder;
    type Decoder = DynamicDecoder;

    fn encoder(&mut self) -> Self::Encoder {
        DynamicEncoder
    }

    fn decoder(&mut self) -> Self::Decoder {
        DynamicDecoder(self.response.clone())
    }
}

/// The encoding half of [`DynamicCodec`].
#[derive(Debug, Clone, Copy)]
pub struct DynamicEncoder;

impl Encoder for DynamicEncoder {
    type Item = DynamicMessage;
    type Error = Status;

    fn encode(&mut self, item: Self::Item, dst: &mut EncodeBuf<'_>) -> Result<(), Self::Error> {
        item.encode(dst)
            .map_err(|e| Status::internal(format!("failed to encode request: {e}")))
    }
}

/// The decoding half of [`DynamicCodec`].
#[derive(Debug, Clone)]
pub struct DynamicDecoder(MessageDescriptor);

impl Decoder for DynamicDecoder {
    type Item = DynamicMessage;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Self::Item>, Self::Error> {
        DynamicMessage::decode(self.0.clone(), src)
            .map(Some)
            .map_err(|e| {
                Status::internal(format!("failed to decode {}: {e}", self.0.name()))
            })
    }
}
